import torch


def _make_inputs(num_tokens, hidden_size, device="cuda"):
    torch.manual_seed(0)
    return {"x": torch.randn(num_tokens, hidden_size, device=device, dtype=torch.bfloat16)}
