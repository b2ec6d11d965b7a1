import torch


def _make_inputs(num_tokens, intermediate_size, device="cuda"):
    torch.manual_seed(0)
    return {"x": torch.randn(num_tokens, intermediate_size, dtype=torch.bfloat16, device=device)}
