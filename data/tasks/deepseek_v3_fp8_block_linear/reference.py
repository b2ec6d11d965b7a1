import torch
import torch.nn.functional as F

block_size = 128


def weight_dequant(x: torch.Tensor, s: torch.Tensor, block_size: int = 128) -> torch.Tensor:
    """Dequantizes an fp8 weight [M, N] with its per-(block_size x block_size) scales s [ceil(M/bs), ceil(N/bs)]."""
    M, N = x.shape
    s = s.repeat_interleave(block_size, dim=0)[:M].repeat_interleave(block_size, dim=1)[:, :N]
    return x.to(torch.float32) * s


def act_dequant(y: torch.Tensor, s: torch.Tensor, block_size: int = 128) -> torch.Tensor:
    """Undoes act_quant: y [.., K] fp8 with one scale per block_size group of the last dim, s [.., ceil(K / block_size)]."""
    K = y.shape[-1]
    return y.to(torch.float32) * s.repeat_interleave(block_size, dim=-1)[..., :K]


class Model(torch.nn.Module):
    """DeepSeek-V3 inference/model.py `linear` on an fp8 checkpoint: the activation as act_quant left it (e4m3, one scale per 128
    values) and the weight with its weight_scale_inv (one scale per 128 x 128 block), both dequantized in fp32 (weight_dequant),
    F.linear, the result in bf16."""

    def forward(self, x, x_scale, weight, weight_scale_inv):
        w = weight_dequant(weight, weight_scale_inv, block_size)
        y = F.linear(act_dequant(x, x_scale, block_size), w)
        return y.to(torch.bfloat16)
