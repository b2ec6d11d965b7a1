import torch


def _make_inputs(num_seqs, max_seq_len, num_blocks, num_query_heads=32, num_kv_heads=8, head_size=128,
                 block_size=16, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = torch.bfloat16
    query = torch.empty(num_seqs, num_query_heads, head_size, dtype=torch.float32, device=device).uniform_(-1.0, 1.0, generator=g)
    key_cache = torch.empty(num_blocks, block_size, num_kv_heads, head_size, dtype=torch.float32, device=device).uniform_(-1.0, 1.0, generator=g)
    value_cache = torch.empty_like(key_cache).uniform_(-1.0, 1.0, generator=g)

    # Ragged batch: every sequence has its own length; the longest is max_seq_len.
    seq_lens = torch.randint(1, max_seq_len + 1, (num_seqs,), generator=g, device=device, dtype=torch.int32)
    seq_lens[0] = max_seq_len

    # Create the block tables (random pages of the pool, as in vLLM's tests).
    max_num_blocks_per_seq = (max_seq_len + block_size - 1) // block_size
    block_tables = torch.randint(0, num_blocks, (num_seqs, max_num_blocks_per_seq), generator=g, device=device, dtype=torch.int32)
    return {
        "query": query.to(dtype),
        "key_cache": key_cache.to(dtype),
        "value_cache": value_cache.to(dtype),
        "block_tables": block_tables,
        "seq_lens": seq_lens,
    }
