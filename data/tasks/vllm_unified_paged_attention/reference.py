import torch
from torch import nn


class Model(nn.Module):
    """vLLM's unified attention (chunked prefill: decode tokens and prefill chunks in one batch), as its test reference
    ref_paged_attn of tests/kernels/attention/test_flash_attn.py computes it: the query tokens of sequence i are the last
    query_len of its kv_len context tokens, K/V read from the paged caches [num_blocks, block_size, num_kv_heads, head_size]
    through block_tables, causal mask aligned to the end, GQA by repeat_interleave, bf16 probabilities. The lengths arrive as
    the kernel's tensors (cu_seqlens_q, seqused_k)."""

    def forward(self, query, key_cache, value_cache, cu_seqlens_q, seq_lens, block_tables):
        _, block_size, num_kv_heads, head_size = key_cache.shape
        scale = head_size ** -0.5
        cu_q, kv_lens = cu_seqlens_q.tolist(), seq_lens.tolist()
        outputs = []
        for i in range(len(kv_lens)):
            query_len, kv_len = cu_q[i + 1] - cu_q[i], kv_lens[i]
            q = query[cu_q[i]:cu_q[i + 1]] * scale
            num_kv_blocks = (kv_len + block_size - 1) // block_size
            block_indices = block_tables[i, :num_kv_blocks].long()
            k = key_cache[block_indices].view(-1, num_kv_heads, head_size)[:kv_len]
            v = value_cache[block_indices].view(-1, num_kv_heads, head_size)[:kv_len]
            if q.shape[1] != k.shape[1]:
                k = torch.repeat_interleave(k, q.shape[1] // k.shape[1], dim=1)
                v = torch.repeat_interleave(v, q.shape[1] // v.shape[1], dim=1)
            attn = torch.einsum("qhd,khd->hqk", q, k).float()
            mask = torch.triu(torch.ones(query_len, kv_len, device=q.device), diagonal=kv_len - query_len + 1).bool()
            attn.masked_fill_(mask, float("-inf"))
            attn = torch.softmax(attn, dim=-1).to(v.dtype)
            outputs.append(torch.einsum("hqk,khd->qhd", attn, v))
        return torch.cat(outputs, dim=0)
