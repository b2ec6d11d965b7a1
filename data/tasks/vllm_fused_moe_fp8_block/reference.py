import torch
import torch.nn.functional as F
from torch import nn


def per_token_group_quant_fp8(x, group_size, eps=1e-10, dtype=torch.float8_e4m3fn):
    """vLLM's native_per_token_group_quant_fp8 (tests/kernels/quant_utils.py): one scale per group_size values of a row."""
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


def native_w8a8_block_matmul(A, B, As, Bs, block_size, output_dtype, compute_type=torch.float32):
    """vLLM's native_w8a8_block_matmul: A [.., K] and B [N, K] fp8, As [.., K / block_k] and Bs [N / block_n, K / block_k]
    their fp32 scales; each K block's product scaled and accumulated in compute_type, returned in output_dtype."""
    A = A.to(compute_type)
    B = B.to(compute_type)
    assert A.shape[-1] == B.shape[-1]
    assert B.ndim == 2 and B.is_contiguous() and Bs.ndim == 2
    assert len(block_size) == 2
    block_n, block_k = block_size[0], block_size[1]
    assert (A.shape[-1] + block_k - 1) // block_k == As.shape[-1]
    assert A.shape[:-1] == As.shape[:-1]

    M = A.numel() // A.shape[-1]
    N, K = B.shape
    origin_C_shape = A.shape[:-1] + (N,)
    A = A.reshape(M, A.shape[-1])
    As = As.reshape(M, As.shape[-1])
    n_tiles = (N + block_n - 1) // block_n
    k_tiles = (K + block_k - 1) // block_k
    assert n_tiles == Bs.shape[0], f"{n_tiles} == {Bs.shape[0]}"
    assert k_tiles == Bs.shape[1], f"{k_tiles} == {Bs.shape[1]}"

    C_shape = (M, N)
    C = torch.zeros(C_shape, dtype=compute_type, device=A.device)

    A_tiles = [A[:, i * block_k:min((i + 1) * block_k, K)] for i in range(k_tiles)]
    B_tiles = [[B[j * block_n:min((j + 1) * block_n, N), i * block_k:min((i + 1) * block_k, K)] for i in range(k_tiles)]
               for j in range(n_tiles)]
    C_tiles = [C[:, j * block_n:min((j + 1) * block_n, N)] for j in range(n_tiles)]
    As_tiles = [As[:, i:i + 1] for i in range(k_tiles)]

    for i in range(k_tiles):
        for j in range(n_tiles):
            a = A_tiles[i]
            b = B_tiles[j][i]
            c = C_tiles[j]
            s = As_tiles[i] * Bs[j][i]
            c[:, :] += torch.matmul(a, b.t()) * s

    C = C.reshape(origin_C_shape).to(output_dtype)
    return C


def silu_and_mul(x):
    # vLLM SiluAndMul.forward_native
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


class Model(nn.Module):
    """vLLM's torch-native fused experts with fp8 block scales (tests/kernels/moe/utils.py torch_experts, block_shape [128, 128]):
    the tokens repeated k times and quantized per 1 x 128 group, rows masked per expert, native_w8a8_block_matmul against w1[e],
    SiluAndMul, the intermediate quantized per group again, native_w8a8_block_matmul against w2[e], the [M, k, K] slot outputs
    times the top-k weights summed over k in fp32."""

    def __init__(self, block_shape=(128, 128)):
        super().__init__()
        self.block_shape = list(block_shape)

    def forward(self, hidden_states, w1, w2, w1_scale, w2_scale, topk_weights, topk_ids):
        # hidden_states [M, K] bf16; w1 [E, 2N, K] and w2 [E, K, N] float8_e4m3fn; w1_scale [E, 2N/128, K/128] and
        # w2_scale [E, K/128, N/128] fp32; topk_weights [M, topk] fp32; topk_ids [M, topk] int32
        block_shape = self.block_shape
        M, K = hidden_states.shape
        topk = topk_ids.shape[1]
        a = hidden_states.view(M, -1, K).repeat(1, topk, 1).reshape(-1, K)
        out = torch.zeros(M * topk, w2.shape[1], dtype=a.dtype, device=a.device)

        a, a_scale = per_token_group_quant_fp8(a, block_shape[1])

        num_experts = w1.shape[0]
        topk_ids = topk_ids.view(-1)
        for i in range(num_experts):
            mask = topk_ids == i
            if mask.sum():
                tmp1 = native_w8a8_block_matmul(a[mask], w1[i], a_scale[mask], w1_scale[i], block_shape, out.dtype)
                tmp2 = silu_and_mul(tmp1)
                tmp2, b_scale = per_token_group_quant_fp8(tmp2, block_shape[1])
                out[mask] = native_w8a8_block_matmul(tmp2, w2[i], b_scale, w2_scale[i], block_shape, out.dtype)

        return (out.view(M, -1, w2.shape[1]).to(torch.float32) * topk_weights.view(M, -1, 1)).sum(dim=1).to(out.dtype)
