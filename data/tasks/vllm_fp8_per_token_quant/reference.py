import torch

FP8_DTYPE = torch.float8_e4m3fn


def as_float32_tensor(x):
    return torch.as_tensor(x, dtype=torch.float32, device="cuda" if torch.cuda.is_available() else "cpu")


def ref_dynamic_per_token_quant(x: torch.Tensor, quant_dtype: torch.dtype, scale_ub=None):
    assert quant_dtype in [torch.int8, FP8_DTYPE]
    qtype_traits = torch.iinfo(quant_dtype) if quant_dtype == torch.int8 else torch.finfo(quant_dtype)
    qtype_traits_max = qtype_traits.max
    qtype_traits_min = qtype_traits.min
    qtype_max = as_float32_tensor(qtype_traits_max).to(x.device)
    s_1 = as_float32_tensor(1.0).to(x.device)
    s_512 = as_float32_tensor(512.0).to(x.device)

    # For fp8, in order to match the cuda kernel output, we have to do exactly
    # the same operations as in the corresponding fp8 kernel to prevent
    # rounding errors.

    # Compute scales
    x_token_max, _ = x.abs().max(dim=-1)
    x_token_max = x_token_max.to(torch.float32)
    if scale_ub is not None:
        x_token_max = x_token_max.clamp(max=scale_ub)
    scales = (x_token_max / qtype_max)[:, None]

    # Quant
    if quant_dtype == torch.int8:
        iscales = as_float32_tensor(s_1 / scales)
        torch_out = (x.to(torch.float32) * iscales).round().clamp(qtype_traits_min, qtype_traits_max).to(quant_dtype)
    else:
        min_scaling_factor = s_1 / (qtype_max * s_512)
        scales = scales.clamp(min=min_scaling_factor)
        torch_out = x.to(torch.float32) / scales
        torch_out = torch_out.clamp(qtype_traits_min, qtype_traits_max).to(quant_dtype)

    return torch_out, scales


class Model(torch.nn.Module):
    """Dynamic per-token FP8 E4M3 quantisation, vLLM's test reference ref_dynamic_per_token_quant(x, FP8_DTYPE): q and scales[T, 1]."""

    def forward(self, x):
        return ref_dynamic_per_token_quant(x, FP8_DTYPE)
