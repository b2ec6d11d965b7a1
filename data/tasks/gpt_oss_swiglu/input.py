import torch


def _make_inputs(num_tokens, intermediate_size=2880, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    x = 2.0 * torch.randn(num_tokens, 2 * intermediate_size, generator=g, device=device)
    return {"x": x.to(torch.bfloat16)}
