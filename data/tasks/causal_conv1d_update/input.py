import torch


def _make_inputs(batch, d_inner, d_conv=4, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(batch, d_inner, generator=g, device=device).to(torch.bfloat16)
    conv_state = torch.randn(batch, d_inner, d_conv, generator=g, device=device).to(torch.bfloat16)
    return {"x": x, "conv_state": conv_state}
