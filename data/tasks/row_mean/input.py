import torch


def _make_inputs(num_tokens, hidden_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    # offset so that the means are not all ~0
    x = torch.randn(num_tokens, hidden_size, generator=g, device=device) + torch.randn(num_tokens, 1, generator=g, device=device)
    return {"hidden_states": x.to(torch.bfloat16)}
