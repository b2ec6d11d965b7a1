import torch


def _make_inputs(num_tokens, intermediate_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(num_tokens, 2 * intermediate_size, generator=g, device=device)
    return {"up_states": x.to(torch.bfloat16)}
