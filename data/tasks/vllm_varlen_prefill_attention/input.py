import torch


def _make_inputs(query_lens, context_lens=None, num_q_heads=32, num_kv_heads=8, head_size=128, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = torch.bfloat16
    context_lens = context_lens or query_lens  # self-attention prefill: every query's keys are its own sequence
    total_q, total_k = sum(query_lens), sum(context_lens)
    q = torch.empty(total_q, num_q_heads, head_size, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    k = torch.empty(total_k, num_kv_heads, head_size, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    v = torch.empty(total_k, num_kv_heads, head_size, device=device, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    cu_seqlens_q = torch.tensor([0] + query_lens, dtype=torch.int32, device=device).cumsum(0, dtype=torch.int32)
    cu_seqlens_k = torch.tensor([0] + context_lens, dtype=torch.int32, device=device).cumsum(0, dtype=torch.int32)
    return {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k,
            "max_seqlen_q": max(query_lens), "max_seqlen_k": max(context_lens)}
