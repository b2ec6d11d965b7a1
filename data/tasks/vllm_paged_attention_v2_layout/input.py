import torch


def _make_inputs(num_seqs, context_len, num_q_heads=32, num_kv_heads=8, head_size=128, block_size=16, ragged=True, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = torch.bfloat16
    x = 16 // torch.tensor([], dtype=dtype).element_size()
    max_blocks_per_seq = (context_len + block_size - 1) // block_size
    num_blocks = num_seqs * max_blocks_per_seq
    query = torch.empty(num_seqs, num_q_heads, head_size, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    key_cache = torch.empty(num_blocks, num_kv_heads, head_size // x, block_size, x, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    value_cache = torch.empty(num_blocks, num_kv_heads, head_size, block_size, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    block_tables = torch.randperm(num_blocks, generator=g, device=device).to(torch.int32).reshape(num_seqs, max_blocks_per_seq)
    if ragged:  # a running batch: every sequence at its own length
        seq_lens = torch.randint(1, context_len + 1, (num_seqs,), generator=g, device=device, dtype=torch.int32)
        seq_lens[0] = context_len
    else:
        seq_lens = torch.full((num_seqs,), context_len, dtype=torch.int32, device=device)
    return {"query": query, "key_cache": key_cache, "value_cache": value_cache, "block_tables": block_tables, "seq_lens": seq_lens}
