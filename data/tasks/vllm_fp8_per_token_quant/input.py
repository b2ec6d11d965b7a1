import torch


def _make_inputs(num_tokens, hidden_size, scale=1.0, seed=0, device="cuda"):
    torch.manual_seed(seed)
    x = (torch.rand(num_tokens, hidden_size, dtype=torch.bfloat16, device=device) - 0.5) * 2 * scale + 1e-6
    return {"x": x}
