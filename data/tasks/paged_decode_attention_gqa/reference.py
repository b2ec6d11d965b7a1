import math

import torch


class Model(torch.nn.Module):
    """Paged decode attention with grouped-query attention (vLLM paged_attention semantics).

    One new query token per sequence attends to all of that sequence's cached
    keys/values, which live in fixed-size pages ("blocks") of a shared cache:

      query        [num_seqs, num_q_heads, head_size]                 bf16
      key_cache    [num_blocks, block_size, num_kv_heads, head_size]  bf16
      value_cache  [num_blocks, block_size, num_kv_heads, head_size]  bf16
      block_tables [num_seqs, max_blocks_per_seq]                     int32
      seq_lens     [num_seqs]                                         int32
      out          [num_seqs, num_q_heads, head_size]                 bf16

    Token t of sequence s is key_cache[block_tables[s, t // block_size], t % block_size].
    Query head h reads KV head h // (num_q_heads // num_kv_heads).
    scale = 1 / sqrt(head_size). No causal mask is needed (the query is the
    newest token); positions >= seq_lens[s] are ignored. Scores, softmax and
    the weighted sum of values are computed in fp32; the output is rounded to
    bf16 once.
    """

    def __init__(self):
        super().__init__()

    def forward(self, query, key_cache, value_cache, block_tables, seq_lens):
        num_seqs, num_q_heads, head_size = query.shape
        _, block_size, num_kv_heads, _ = key_cache.shape
        group = num_q_heads // num_kv_heads
        scale = 1.0 / math.sqrt(head_size)

        out = torch.empty_like(query)
        for s in range(num_seqs):
            seq_len = int(seq_lens[s])
            num_pages = (seq_len + block_size - 1) // block_size
            pages = block_tables[s, :num_pages].long()
            # Gather this sequence's pages: [seq_len, num_kv_heads, head_size]
            k = key_cache[pages].reshape(-1, num_kv_heads, head_size)[:seq_len].float()
            v = value_cache[pages].reshape(-1, num_kv_heads, head_size)[:seq_len].float()
            # Query heads grouped by the KV head they share: [num_kv_heads, group, head_size]
            q = query[s].float().reshape(num_kv_heads, group, head_size)
            scores = torch.einsum("hgd,lhd->hgl", q, k) * scale
            probs = torch.softmax(scores, dim=-1)
            o = torch.einsum("hgl,lhd->hgd", probs, v)
            out[s] = o.reshape(num_q_heads, head_size).to(out.dtype)
        return out
