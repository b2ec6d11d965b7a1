import torch


def _make_inputs(query_lens, context_lens, num_q_heads=32, num_kv_heads=8, head_size=128, block_size=16, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = torch.bfloat16
    pages = [(n + block_size - 1) // block_size for n in context_lens]
    max_blocks = max(pages)
    num_blocks = sum(pages) + 8  # a few pages no sequence owns
    query = torch.empty(sum(query_lens), num_q_heads, head_size, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    key_cache = torch.empty(num_blocks, block_size, num_kv_heads, head_size, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    value_cache = torch.empty(num_blocks, block_size, num_kv_heads, head_size, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    # Each sequence owns its pages, scattered over the cache as an allocator leaves them; unused entries are 0.
    order = torch.randperm(num_blocks, generator=g, device=device).to(torch.int32)
    block_tables = torch.zeros(len(context_lens), max_blocks, dtype=torch.int32, device=device)
    start = 0
    for i, n in enumerate(pages):
        block_tables[i, :n] = order[start:start + n]
        start += n
    cu_seqlens_q = torch.tensor([0] + query_lens, dtype=torch.int32, device=device).cumsum(0, dtype=torch.int32)
    seq_lens = torch.tensor(context_lens, dtype=torch.int32, device=device)
    return {"query": query, "key_cache": key_cache, "value_cache": value_cache, "cu_seqlens_q": cu_seqlens_q, "seq_lens": seq_lens,
            "block_tables": block_tables}
