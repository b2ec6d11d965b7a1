import math

import torch


def ref_masked_attention(query, key, value, scale):
    attn_weights = scale * torch.einsum("qhd,khd->hqk", query, key).float()
    attn_weights = torch.softmax(attn_weights, dim=-1).to(value.dtype)
    out = torch.einsum("hqk,khd->qhd", attn_weights, value)
    return out


class Model(torch.nn.Module):
    """vLLM paged decode attention in its own cache layout (ref_single_query_cached_kv_attention of tests/kernels/attention/
    test_attention.py, gathered per sequence instead of per token): key_cache [num_blocks, num_kv_heads, head_size // x,
    block_size, x], value_cache [num_blocks, num_kv_heads, head_size, block_size]; GQA by repeat_interleave."""

    def forward(self, query, key_cache, value_cache, block_tables, seq_lens):
        num_seqs, num_query_heads, head_size = query.shape
        num_kv_heads = value_cache.shape[1]
        block_size = value_cache.shape[3]
        num_queries_per_kv = num_query_heads // num_kv_heads
        scale = float(1.0 / math.sqrt(head_size))
        output = torch.empty_like(query)
        for i in range(num_seqs):
            seq_len = int(seq_lens[i])
            num_pages = (seq_len + block_size - 1) // block_size
            pages = block_tables[i, :num_pages].long()
            # [pages, Hkv, D/x, P, x] -> [tokens, Hkv, D]; [pages, Hkv, D, P] -> [tokens, Hkv, D]
            keys = key_cache[pages].permute(0, 3, 1, 2, 4).reshape(-1, num_kv_heads, head_size)[:seq_len]
            values = value_cache[pages].permute(0, 3, 1, 2).reshape(-1, num_kv_heads, head_size)[:seq_len]
            if num_queries_per_kv > 1:
                keys = torch.repeat_interleave(keys, num_queries_per_kv, dim=1)
                values = torch.repeat_interleave(values, num_queries_per_kv, dim=1)
            out = ref_masked_attention(query[i].unsqueeze(0), keys, values, scale)
            output[i].copy_(out.view(num_query_heads, head_size))
        return output
