from typing import Optional

import torch


def ref_masked_attention(query, key, value, scale, attn_mask=None):
    attn_weights = scale * torch.einsum("qhd,khd->hqk", query.float(), key.float())
    if attn_mask is not None:
        attn_weights = attn_weights + attn_mask.float()
    attn_weights = torch.softmax(attn_weights, dim=-1)
    out = torch.einsum("hqk,khd->qhd", attn_weights, value.float())
    return out


class Model(torch.nn.Module):
    """Paged decode attention over the [num_blocks, block_size, num_kv_heads, head_size] cache, written like vLLM's kernel-test reference: pages gathered with index_select, GQA by repeat_interleave, fp32 attention."""

    def __init__(self, scale: Optional[float] = None):
        super().__init__()
        self.scale = scale

    def forward(self, query, key_cache, value_cache, block_tables, seq_lens):
        num_seqs, num_query_heads, head_size = query.shape
        _, block_size, num_kv_heads, _ = key_cache.shape
        num_queries_per_kv = num_query_heads // num_kv_heads
        scale = self.scale if self.scale is not None else float(head_size) ** -0.5

        output = torch.empty_like(query)
        seq_lens_lst = seq_lens.cpu().tolist()
        for i in range(num_seqs):
            q = query[i].unsqueeze(0)  # [1, num_query_heads, head_size]
            seq_len = int(seq_lens_lst[i])
            num_used_blocks = (seq_len + block_size - 1) // block_size
            block_ids = block_tables[i, :num_used_blocks].to(torch.long)

            keys = key_cache.index_select(0, block_ids).flatten(0, 1)[:seq_len]      # [seq_len, num_kv_heads, head_size]
            values = value_cache.index_select(0, block_ids).flatten(0, 1)[:seq_len]
            if num_queries_per_kv > 1:
                # Handle MQA and GQA
                keys = torch.repeat_interleave(keys, num_queries_per_kv, dim=1)
                values = torch.repeat_interleave(values, num_queries_per_kv, dim=1)

            out = ref_masked_attention(q, keys, values, scale)
            out = out.view(num_query_heads, head_size)
            output[i].copy_(out)
        return output
