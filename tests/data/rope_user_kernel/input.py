import torch


def _make_inputs(num_tokens, num_heads, head_dim, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(num_tokens, num_heads, head_dim, generator=g, device="cuda").to(torch.bfloat16)
    positions = torch.randint(0, 4096, (num_tokens,), generator=g, device="cuda")
    return {"x": x, "positions": positions}
