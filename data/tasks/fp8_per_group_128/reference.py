import torch


def native_per_token_group_quant_fp8(x, group_size, eps=1e-10, dtype=torch.float8_e4m3fn):
    """Function to perform per-token-group quantization on an input tensor `x` using native torch."""
    assert x.shape[-1] % group_size == 0, "the last dimension of `x` cannot be divisible by `group_size`"
    assert x.is_contiguous(), "`x` is not contiguous"

    finfo = torch.finfo(dtype)
    fp8_min = finfo.min
    fp8_max = finfo.max

    x_ = x.reshape(x.numel() // group_size, group_size)
    amax = x_.abs().max(dim=-1, keepdim=True)[0].clamp(min=eps).to(torch.float32)
    x_s = amax / fp8_max
    x_q = (x_ / x_s).clamp(min=fp8_min, max=fp8_max).to(dtype)
    x_q = x_q.reshape(x.shape)
    x_s = x_s.reshape(x.shape[:-1] + (x.shape[-1] // group_size,))

    return x_q, x_s


class Model(torch.nn.Module):
    """DeepSeek-V3 block-wise activation quant, SGLang/vLLM test reference native_per_token_group_quant_fp8: one scale per 128 columns, scales [T, H/128]."""

    def __init__(self, group_size=128):
        super().__init__()
        self.group_size = group_size

    def forward(self, x):
        return native_per_token_group_quant_fp8(x, self.group_size)
