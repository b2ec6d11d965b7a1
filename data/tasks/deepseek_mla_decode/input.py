import torch


def _make_inputs(num_seqs, num_heads, context_len, kv_lora_rank=512, qk_rope_head_dim=64, block_size=64, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = torch.bfloat16
    dim = kv_lora_rank + qk_rope_head_dim
    max_blocks_per_seq = (context_len + block_size - 1) // block_size
    num_blocks = num_seqs * max_blocks_per_seq
    q = torch.randn(num_seqs, num_heads, dim, generator=g, device=device).to(dtype)
    kv_c_and_k_pe_cache = torch.randn(num_blocks, block_size, dim, generator=g, device=device).to(dtype)
    block_table = torch.randperm(num_blocks, generator=g, device=device).to(torch.int32).view(num_seqs, max_blocks_per_seq)
    seq_lens = torch.randint(context_len // 2, context_len + 1, (num_seqs,), generator=g, device=device, dtype=torch.int32)
    seq_lens[0] = context_len
    return {"q": q, "kv_c_and_k_pe_cache": kv_c_and_k_pe_cache, "block_table": block_table, "seq_lens": seq_lens}
