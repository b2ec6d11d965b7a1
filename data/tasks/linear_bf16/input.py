import torch


def _make_inputs(num_tokens, in_features, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(num_tokens, in_features, generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(torch.bfloat16)}
