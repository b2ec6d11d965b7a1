import math

import torch


def _make_inputs(num_tokens, hidden_size, num_heads, num_kv_heads, head_dim=128, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    out_features = (num_heads + 2 * num_kv_heads) * head_dim
    x = torch.randn(num_tokens, hidden_size, generator=g, device=device)
    weight = torch.randn(out_features, hidden_size, generator=g, device=device) / math.sqrt(hidden_size)
    bias = 0.5 * torch.randn(out_features, generator=g, device=device)
    return {"x": x.to(torch.bfloat16), "weight": weight.to(torch.bfloat16), "bias": bias.to(torch.bfloat16)}
