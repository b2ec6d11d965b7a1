import torch


def _make_inputs(num_tokens, intermediate_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    gate = torch.randn(num_tokens, intermediate_size, generator=g, device=device).to(torch.bfloat16)
    up = torch.randn(num_tokens, intermediate_size, generator=g, device=device).to(torch.bfloat16)
    return {"gate": gate, "up": up}
