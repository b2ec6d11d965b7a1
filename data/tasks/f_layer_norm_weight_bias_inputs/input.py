import torch


def _make_inputs(num_tokens, hidden_size, device="cuda"):
    g = torch.Generator(device=device).manual_seed(1)
    x = torch.randn(num_tokens, hidden_size, generator=g, device=device)
    weight = torch.rand(hidden_size, generator=g, device=device) + 0.5
    bias = 0.1 * torch.randn(hidden_size, generator=g, device=device)
    return {"x": x, "weight": weight, "bias": bias}
