import torch


def _make_inputs(num_tokens, hidden_size, dtype=torch.bfloat16, seed=0, device="cuda"):
    torch.manual_seed(seed)
    x = torch.randn(num_tokens, hidden_size, dtype=dtype, device=device)
    return {"x": x}
