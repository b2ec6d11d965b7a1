import torch


def ref_dynamic_per_token_quant_int8(x: torch.Tensor):
    qtype_traits = torch.iinfo(torch.int8)
    qtype_max = torch.tensor(float(qtype_traits.max), dtype=torch.float32, device=x.device)

    # Compute scales
    x_token_max, _ = x.abs().max(dim=-1)
    x_token_max = x_token_max.to(torch.float32)
    scales = (x_token_max / qtype_max)[:, None]

    # Quant
    iscales = 1.0 / scales
    torch_out = (x.to(torch.float32) * iscales).round().clamp(qtype_traits.min, qtype_traits.max).to(torch.int8)
    return torch_out, scales


class Model(torch.nn.Module):
    """Dynamic per-token INT8 quantisation (W8A8 / SmoothQuant), vLLM test reference for scaled_int8_quant: round(x * 127 / amax) -> int8, scales [T, 1]."""

    def forward(self, x):
        return ref_dynamic_per_token_quant_int8(x)
