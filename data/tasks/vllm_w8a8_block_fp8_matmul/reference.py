import torch


def native_w8a8_block_matmul(A: torch.Tensor, B: torch.Tensor, As: torch.Tensor, Bs: torch.Tensor, block_size: list[int],
                             output_dtype: torch.dtype, compute_type: torch.dtype = torch.float32) -> torch.Tensor:
    """Matrix multiplication with block-wise quantization using native torch.

    A [.., K] and B [N, K] are fp8, As [.., K / block_k] and Bs [N / block_n, K / block_k] their float32 scales;
    each K block's product is scaled and accumulated in compute_type, the result returned in output_dtype.
    """
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


class Model(torch.nn.Module):
    """vLLM's test reference native_w8a8_block_matmul (tests/kernels/quant_utils.py) for w8a8_block_fp8_matmul: e4m3 A and B,
    1 x 128 activation scales, 128 x 128 weight scales, each K block promoted to fp32, bf16 out."""

    def __init__(self, block_size=(128, 128), output_dtype="bfloat16"):
        super().__init__()
        self.block_size = list(block_size)
        self.output_dtype = getattr(torch, output_dtype)

    def forward(self, A, B, As, Bs):
        return native_w8a8_block_matmul(A, B, As, Bs, self.block_size, self.output_dtype)
