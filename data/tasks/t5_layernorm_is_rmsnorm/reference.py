import torch
from torch import nn


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        """
        Construct a layernorm module in the T5 style. No bias and no subtraction of mean.
        """
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        # T5 uses a layer_norm which only scales and doesn't shift, which is also known as Root Mean
        # Square Layer Normalization https://arxiv.org/abs/1910.07467 thus varience is calculated
        # w/o mean and there is no bias. Additionally we want to make sure that the accumulation for
        # half-precision inputs is done in fp32

        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)

        # convert into half-precision if necessary
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)

        return self.weight * hidden_states


class Model(nn.Module):
    """HF transformers T5LayerNorm (modeling_t5.py): named a LayerNorm, computes an RMSNorm (no mean, no bias)."""

    def __init__(self, d_model, layer_norm_epsilon=1e-6, seed=0):
        super().__init__()
        self.final_layer_norm = T5LayerNorm(d_model, eps=layer_norm_epsilon)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.final_layer_norm.weight.copy_(1.0 + 0.1 * torch.randn(d_model, generator=g))
        self.final_layer_norm.to(torch.bfloat16)

    def forward(self, hidden_states):
        return self.final_layer_norm(hidden_states)
