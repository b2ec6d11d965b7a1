import torch
from torch import nn


class Model(nn.Module):
    """A bias-free projection as HF Llama builds it: nn.Linear(hidden_size, out_features, bias=config.attention_bias=False), bf16."""

    def __init__(self, hidden_size, out_features, initializer_range=0.02, seed=0):
        super().__init__()
        self.q_proj = nn.Linear(hidden_size, out_features, bias=False)
        # _init_weights: normal(0, initializer_range), from a fixed generator
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.q_proj.weight.copy_(torch.randn(out_features, hidden_size, generator=g) * initializer_range)
        self.to(torch.bfloat16)

    def forward(self, hidden_states):
        return self.q_proj(hidden_states)
