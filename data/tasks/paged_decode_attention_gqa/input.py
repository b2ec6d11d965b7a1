import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _make_inputs(num_seqs, context_len, num_q_heads=32, num_kv_heads=8, head_size=128,
                 block_size=16, dtype="bf16", seed=0, device="cuda"):
    torch_dtype = _DTYPES[dtype] if isinstance(dtype, str) else dtype
    g = torch.Generator(device=device).manual_seed(seed)

    max_blocks_per_seq = (context_len + block_size - 1) // block_size
    num_blocks = num_seqs * max_blocks_per_seq

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(torch_dtype)

    query = randn(num_seqs, num_q_heads, head_size)
    key_cache = randn(num_blocks, block_size, num_kv_heads, head_size)
    value_cache = randn(num_blocks, block_size, num_kv_heads, head_size)
    # Pages scattered through the pool, as after many allocations and frees.
    block_tables = torch.randperm(num_blocks, generator=g, device=device)
    block_tables = block_tables.to(torch.int32).reshape(num_seqs, max_blocks_per_seq)
    seq_lens = torch.full((num_seqs,), context_len, dtype=torch.int32, device=device)
    return {
        "query": query,
        "key_cache": key_cache,
        "value_cache": value_cache,
        "block_tables": block_tables,
        "seq_lens": seq_lens,
    }
