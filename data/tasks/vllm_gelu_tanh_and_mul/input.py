import torch


def _make_inputs(num_tokens, d, seed=0, device="cuda"):
    torch.manual_seed(seed)
    return {"x": torch.randn(num_tokens, 2 * d, dtype=torch.bfloat16, device=device)}
