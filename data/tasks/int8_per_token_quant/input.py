import torch


def _make_inputs(num_tokens, hidden_size, seed=0, device="cuda"):
    torch.manual_seed(seed)
    return {"x": torch.randn(num_tokens, hidden_size, dtype=torch.bfloat16, device=device) * 2.0}
