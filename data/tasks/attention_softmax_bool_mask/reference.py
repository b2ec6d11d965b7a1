import torch
from torch import nn


class Model(nn.Module):
    """Masked attention probabilities: scores.masked_fill(~mask, min) then fp32 softmax, with a boolean causal mask input (HF / research eager-attention style)."""

    def forward(self, attn_weights, attention_mask):
        # attention_mask: bool, True where the key may be attended to
        attn_weights = attn_weights.masked_fill(~attention_mask, torch.finfo(attn_weights.dtype).min)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(attn_weights.dtype)
        return attn_weights
