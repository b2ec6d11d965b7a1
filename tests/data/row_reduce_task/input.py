import torch


def _make_inputs(num_tokens, hidden_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(num_tokens, hidden_size, generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(torch.bfloat16)}
