import torch
from torch import nn


class Model(nn.Module):
    """GPT-2 style final LayerNorm: nn.LayerNorm(n_embd, eps=layer_norm_epsilon) with weight and bias (HF modeling_gpt2.py ln_f), bf16."""

    def __init__(self, n_embd, layer_norm_epsilon=1e-5, seed=0):
        super().__init__()
        self.ln_f = nn.LayerNorm(n_embd, eps=layer_norm_epsilon)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.ln_f.weight.copy_(1.0 + 0.1 * torch.randn(n_embd, generator=g))
            self.ln_f.bias.copy_(0.1 * torch.randn(n_embd, generator=g))
        self.to(torch.bfloat16)

    def forward(self, hidden_states):
        hidden_states = self.ln_f(hidden_states)
        return hidden_states
