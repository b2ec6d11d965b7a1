# library_paths.py: torch's best library path for a family's work (SDPA with the flash backend for
# attention, cuBLAS for the GEMMs, torch._scaled_mm for fp8), built from the V0 launcher's own
# arguments (ABI order, baseline/kernels/ABI.md), and the FLOPs of the work each one does; the
# generated_bench.py timing run puts it beside the V0 so the rates compare in one process.
# A family without a library path (a cache write, a filter) is absent from LIBRARY.
import torch


class Path:
    """A library call on the V0's tensors: call() runs it; flops is the work that call does (a padded
    batch does more than the packed V0), v0_flops the V0's own, so rates compare work for work."""

    def __init__(self, label, call, flops, v0_flops):
        self.label, self.call, self.flops, self.v0_flops = label, call, float(flops), float(v0_flops)


def _flash_backend():
    """The context that holds SDPA to its flash kernel on a GPU (on the CPU: the default, for a dry run)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(SDPBackend.FLASH_ATTENTION)


def _pairs(lq, lk, causal):
    """(query, key) pairs one head attends over: bottom-right causal sees i + lk - lq + 1 keys."""
    if not causal:
        return lq * lk
    return sum(max(0, min(lk, i + lk - lq + 1)) for i in range(lq))


def prefill_attention(tensors, dims, params):
    """Packed (layout 0) or paged (layout 1) sequences as one padded [B, Hq, S, D] batch for SDPA-flash
    (GQA by enable_gqa); the paged K/V gathered into that batch before timing."""
    q, k, v, cu_q, kv_lens, _, tables = tensors[:7]
    B, Hq, Hkv, D, _, _, _, causal, layout = (int(x) for x in dims[:9])
    cu = cu_q.tolist()
    lq = [cu[b + 1] - cu[b] for b in range(B)]
    if layout == 0:
        ck = kv_lens.tolist()
        lk = [ck[b + 1] - ck[b] for b in range(B)]
        keys = lambda t, b: t[ck[b]:ck[b + 1]]
    else:
        P = int(dims[9])
        lk = kv_lens.tolist()
        rows = lambda b: torch.cat([torch.arange(int(p) * P, int(p) * P + P, device=k.device) for p in tables[b, :(lk[b] + P - 1) // P]])[:lk[b]]
        flat = lambda t: t.reshape(-1, Hkv, D)
        keys = lambda t, b: flat(t)[rows(b)]
    sq, sk = max(lq), max(lk)
    qb = q.new_zeros(B, Hq, sq, D)
    kb, vb = k.new_zeros(B, Hkv, sk, D), v.new_zeros(B, Hkv, sk, D)
    for b in range(B):
        # Left-aligned: when every sequence has as many queries as keys (self-attention prefill), SDPA's
        # top-left causal mask is the V0's, and the valid rows are the V0's outputs (the bench's dry run checks it).
        qb[b, :, :lq[b]] = q[cu[b]:cu[b + 1]].transpose(0, 1)
        kb[b, :, :lk[b]] = keys(k, b).transpose(0, 1)
        vb[b, :, :lk[b]] = keys(v, b).transpose(0, 1)
    scale = float(params[0])
    is_causal = bool(causal) and lq == lk

    def call():
        with _flash_backend():
            return torch.nn.functional.scaled_dot_product_attention(qb, kb, vb, is_causal=is_causal, scale=scale, enable_gqa=Hq != Hkv)
    per_pair = 4 * D * Hq  # two products of D multiply-adds a (query, key) pair and head
    lib = B * per_pair * _pairs(sq, sk, is_causal)
    mine = sum(per_pair * _pairs(lq[b], lk[b], bool(causal)) for b in range(B))
    return Path("SDPA flash (padded batch)", call, lib, mine)


def gemm(tensors, dims, params):
    """x[M,K] w[N,K]^T (+ bias) by cuBLAS through F.linear."""
    x, w, bias = tensors[:3]
    M, N, K = (int(d) for d in dims[:3])
    return Path("cuBLAS (F.linear)", lambda: torch.nn.functional.linear(x, w, bias), 2 * M * N * K, 2 * M * N * K)


def fused_moe(tensors, dims, params):
    """The grouped GEMMs' FLOPs as two dense cuBLAS GEMMs through torch.matmul: the T*k routed rows
    [T*k, H] x [H, 2I], then [T*k, I] x [I, H], on one expert's weights (no routing, no gather: the
    dense bound the grouped GEMMs chase). The rows are gathered and the second GEMM's input made before timing."""
    x, w13, w2 = tensors[:3]
    T, H, I, E, K = (int(d) for d in dims[:5])
    rows = x.reshape(T, H).repeat_interleave(K, dim=0)  # [T*k, H]: each token once per slot
    mid = torch.randn(T * K, I, device=x.device).to(x.dtype)
    up_t, down_t = w13[0].t(), w2[0].t()  # [H, 2I] and [I, H] views: cuBLAS takes the transpose flag

    def call():
        return torch.matmul(rows, up_t), torch.matmul(mid, down_t)
    flops = 6 * T * K * H * I
    return Path("cuBLAS (dense, T*k rows)", call, flops, flops)



def _pad16(rows):
    """rows [M, K] padded with zero rows to a multiple of 16 (cuBLASLt's fp8 constraint; fp8 zeros are byte 0 in both formats)."""
    m16 = (rows.shape[0] + 15) // 16 * 16
    return rows if m16 == rows.shape[0] else torch.cat([rows, rows.new_zeros(m16 - rows.shape[0], rows.shape[1])])


def fp8_block_gemm(tensors, dims, params):
    """The fp8 dense rate on the same M, N, K: torch._scaled_mm (cuBLASLt fp8) with one scale per tensor
    (the block scales have no cuBLASLt equivalent on every torch; per-tensor is the library's plain fp8
    GEMM, an upper bound on what block scaling may cost). A padded to a multiple of 16 rows (cuBLASLt's
    fp8 constraint), the padding counted in the library's FLOPs."""
    a, b = tensors[:2]
    M, N, K = (int(d) for d in dims[:3])
    ap = _pad16(a)
    m16 = ap.shape[0]
    one = torch.ones((), dtype=torch.float32, device=a.device)

    def call():
        return torch._scaled_mm(ap, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return Path("torch._scaled_mm (fp8, per-tensor scales)", call, 2 * m16 * N * K, 2 * M * N * K)


def fused_moe_fp8(tensors, dims, params):
    """The fp8 grouped GEMMs' FLOPs as two dense fp8 GEMMs through torch._scaled_mm (cuBLASLt, per-tensor
    scales): the T*k routed rows [T*k, H] x [H, 2I], then [T*k, I] x [I, H], on one expert's weights (no
    routing, no quantization, no gather). Rows padded to a multiple of 16 (cuBLASLt's fp8 constraint),
    the padding counted in the library's FLOPs; the fp8 rows are made before timing."""
    x, w13, w2 = tensors[:3]
    T, H, I, E, K = (int(d) for d in dims[:5])
    fp8 = w13.dtype
    rows = _pad16(x.reshape(T, H).repeat_interleave(K, dim=0).float().clamp(-448, 448).to(fp8))
    m16 = rows.shape[0]
    mid = torch.randn(m16, I, device=x.device).to(fp8)
    one = torch.ones((), dtype=torch.float32, device=x.device)

    def call():
        return (torch._scaled_mm(rows, w13[0].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                torch._scaled_mm(mid, w2[0].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    return Path("torch._scaled_mm (fp8 dense, T*k rows)", call, 6 * m16 * H * I, 6 * T * K * H * I)


# Family -> its library path; the fused MoEs' are their grouped GEMMs' FLOPs as dense cuBLAS ones.
LIBRARY = {"prefill_attention": prefill_attention, "gemm": gemm, "fused_moe": fused_moe, "fp8_block_gemm": fp8_block_gemm,
           "fused_moe_fp8": fused_moe_fp8}


def library_path(family, tensors, dims, params):
    """The family's library path on these launcher arguments, or None (no such path)."""
    make = LIBRARY.get(family)
    return make(tensors, dims, params) if make else None
