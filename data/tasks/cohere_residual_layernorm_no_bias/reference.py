import torch
from torch import nn


class CohereLayerNorm(nn.Module):
    def __init__(self, hidden_size=None, eps=1e-5, bias=False):
        """The hidden size can be a tuple or an int. The tuple is used for QKNorm to normalize across head_dim"""
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        mean = hidden_states.mean(-1, keepdim=True)
        variance = (hidden_states - mean).pow(2).mean(-1, keepdim=True)
        hidden_states = (hidden_states - mean) * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight.to(torch.float32) * hidden_states
        return hidden_states.to(input_dtype)


class Model(nn.Module):
    """Residual add, then HF CohereLayerNorm (modeling_cohere.py): mean-subtracting LayerNorm with a weight and NO bias."""

    def __init__(self, hidden_size, layer_norm_eps=1e-5, seed=0):
        super().__init__()
        self.input_layernorm = CohereLayerNorm(hidden_size=hidden_size, eps=layer_norm_eps)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.input_layernorm.weight.copy_(1.0 + 0.1 * torch.randn(hidden_size, generator=g))
        self.to(torch.bfloat16)

    def forward(self, hidden_states, residual):
        hidden_states = residual + hidden_states
        return self.input_layernorm(hidden_states)
