import torch


def _make_inputs(num_tokens, hidden_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(num_tokens, hidden_size, generator=g, device=device) + torch.randn(num_tokens, 1, generator=g, device=device)
    return {"x": x.to(torch.bfloat16)}
