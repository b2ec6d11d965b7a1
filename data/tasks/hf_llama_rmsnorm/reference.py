import torch
from torch import nn


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        """
        LlamaRMSNorm is equivalent to T5LayerNorm
        """
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)

    def extra_repr(self):
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}"


class Model(nn.Module):
    """HF transformers LlamaRMSNorm (modeling_llama.py) with bf16 weights, as from_pretrained(torch_dtype=torch.bfloat16) loads it."""

    def __init__(self, hidden_size, rms_norm_eps=1e-6, seed=0):
        super().__init__()
        self.norm = LlamaRMSNorm(hidden_size, eps=rms_norm_eps)
        # Stand-in for a checkpoint: fixed, non-trivial weights.
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(hidden_size, generator=g))
        self.to(torch.bfloat16)

    def forward(self, hidden_states):
        return self.norm(hidden_states)
