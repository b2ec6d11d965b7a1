import torch
from torch import nn


class Model(nn.Module):
    """DeepSeek-V3 MLA decode with the projections absorbed (vLLM/SGLang MLA decode, FlashMLA's reference semantics): every query
    head attends over one shared latent cache row of kv_lora_rank + qk_rope_head_dim dims; the value is the row's first
    kv_lora_rank dims. kv_c_and_k_pe_cache [num_blocks, block_size, 576], paged by block_table."""

    def __init__(self, kv_lora_rank=512, softmax_scale=0.1352337788608801):
        super().__init__()
        self.kv_lora_rank = kv_lora_rank
        self.scale = softmax_scale  # 192 ** -0.5 * mscale ** 2 (yarn, factor 40): vLLM's self.scale for DeepSeek-V3

    def forward(self, q, kv_c_and_k_pe_cache, block_table, seq_lens):
        # q [B, H, kv_lora_rank + qk_rope_head_dim]: W_UK absorbed into q_nope, then q_pe
        num_seqs, num_heads, _ = q.shape
        block_size = kv_c_and_k_pe_cache.shape[1]
        out = q.new_empty(num_seqs, num_heads, self.kv_lora_rank)
        for i in range(num_seqs):
            seq_len = int(seq_lens[i])
            num_pages = (seq_len + block_size - 1) // block_size
            kv = kv_c_and_k_pe_cache[block_table[i, :num_pages].long()].flatten(0, 1)[:seq_len]  # [L, 576]
            kv_c = kv[..., : self.kv_lora_rank]  # the latent part is the value
            scores = torch.matmul(q[i].float(), kv.float().t()) * self.scale  # [H, L]
            probs = torch.softmax(scores, dim=-1)
            out[i] = torch.matmul(probs, kv_c.float()).to(out.dtype)
        return out
