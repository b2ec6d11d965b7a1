import torch

block_size = 128


def act_quant(x: torch.Tensor, block_size: int = 128):
    """DeepSeek-V3's act_quant: one scale per block_size values of the last dim, amax / 448, x / s cast to e4m3
    (a last group shorter than block_size gets its own scale)."""
    K = x.shape[-1]
    g = torch.nn.functional.pad(x.float(), (0, (-K) % block_size)).unflatten(-1, (-1, block_size))
    s = g.abs().amax(dim=-1) / 448.0
    y = (g / s.unsqueeze(-1)).flatten(-2)[..., :K].to(torch.float8_e4m3fn)
    return y, s


def weight_quant(w: torch.Tensor, block_size: int = 128):
    """How the fp8 checkpoint was made: one scale (weight_scale_inv) per 128 x 128 block, amax / 448."""
    N, K = w.shape
    nb, kb = (N + block_size - 1) // block_size, (K + block_size - 1) // block_size
    padded = torch.zeros(nb * block_size, kb * block_size, dtype=torch.float32, device=w.device)
    padded[:N, :K] = w.float()
    blocks = padded.view(nb, block_size, kb, block_size)
    s = blocks.abs().amax(dim=(1, 3)) / 448.0
    q = (blocks / s[:, None, :, None]).view(nb * block_size, kb * block_size)[:N, :K].to(torch.float8_e4m3fn)
    return q, s


def _make_inputs(num_tokens, in_features, out_features, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(num_tokens, in_features, generator=g, device=device).to(torch.bfloat16)
    w = (torch.randn(out_features, in_features, generator=g, device=device) * in_features ** -0.5).to(torch.bfloat16)
    x_fp8, x_scale = act_quant(x, block_size)
    weight, weight_scale_inv = weight_quant(w, block_size)
    return {"x": x_fp8, "x_scale": x_scale, "weight": weight, "weight_scale_inv": weight_scale_inv}
