import torch
from torch import nn


def ref_masked_attention(query, key, value, scale, attn_mask=None):
    attn_weights = scale * torch.einsum("qhd,khd->hqk", query, key).float()
    if attn_mask is not None:
        attn_weights = attn_weights + attn_mask.float()
    attn_weights = torch.softmax(attn_weights, dim=-1).to(value.dtype)
    out = torch.einsum("hqk,khd->qhd", attn_weights, value)
    return out


class Model(nn.Module):
    """Prefill attention over packed variable-length sequences, flash_attn_varlen_func's interface (q [total_q, Hq, D],
    k/v [total_k, Hkv, D], cu_seqlens_q/k int32), computed as vLLM's test reference does it (ref_multi_query_kv_attention of
    tests/kernels/attention/test_attention.py: a loop over the sequences, a causal mask of finfo.min aligned to the end of
    the keys, GQA by repeat_interleave, bf16 probabilities)."""

    def __init__(self, causal=True, softmax_scale=None):
        super().__init__()
        self.causal = causal
        self.softmax_scale = softmax_scale

    def forward(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
        num_heads, head_size = q.shape[1], q.shape[2]
        num_kv_heads = k.shape[1]
        scale = self.softmax_scale if self.softmax_scale is not None else head_size ** -0.5
        if num_heads != num_kv_heads:
            k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
            v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
        cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        outputs = []
        for i in range(len(cu_q) - 1):
            q_len, kv_len = cu_q[i + 1] - cu_q[i], cu_k[i + 1] - cu_k[i]
            attn_mask = None
            if self.causal:
                attn_mask = torch.triu(torch.ones(q_len, kv_len, dtype=q.dtype, device=q.device), diagonal=kv_len - q_len + 1)
                attn_mask = attn_mask * torch.finfo(q.dtype).min
            outputs.append(ref_masked_attention(q[cu_q[i]:cu_q[i + 1]], k[cu_k[i]:cu_k[i + 1]], v[cu_k[i]:cu_k[i + 1]], scale, attn_mask))
        return torch.cat(outputs, dim=0)
