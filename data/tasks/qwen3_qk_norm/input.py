import torch


def _make_inputs(num_tokens, num_heads, head_dim=128, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(num_tokens, num_heads * head_dim, generator=g, device=device, dtype=torch.float32)
    return {"q": q.to(torch.bfloat16)}
