import torch
from torch import nn


class Model(nn.Module):
    """Attention probabilities in HF eager attention: softmax of the bf16 scores in fp32, cast back to the query dtype."""

    def forward(self, attn_weights):
        input_dtype = attn_weights.dtype
        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights.float(), dim=-1).to(input_dtype)
        return attn_weights
