import torch

FP8_MAX = 448.0  # largest finite torch.float8_e4m3fn value


class Model(torch.nn.Module):
    """Dynamic per-token (per-row) FP8 E4M3 quantization.

    For each row i of x [num_tokens, hidden_size] (bf16):
      scale[i] = max(amax(|x[i, :]|), 1e-12) / 448          fp32, shape [num_tokens, 1]
      q[i, :]  = clamp(x[i, :] / scale[i], -448, 448) -> float8_e4m3fn (round to nearest even)

    All arithmetic is fp32. Returns (q, scale); x ~= q.float() * scale.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x):
        xf = x.float()
        amax = xf.abs().amax(dim=-1, keepdim=True)
        scale = torch.clamp(amax, min=1e-12) / FP8_MAX
        q = torch.clamp(xf / scale, -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        return q, scale
