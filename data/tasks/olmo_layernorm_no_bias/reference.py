import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    def __init__(self, size, eps=1e-5, elementwise_affine=True, bias=False):
        super().__init__()
        self.normalized_shape = (size,)
        self.eps = eps
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape))
            if bias:
                self.bias = nn.Parameter(torch.zeros(self.normalized_shape))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("bias", None)
            self.register_parameter("weight", None)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, weight=self.weight, bias=self.bias, eps=self.eps)


class Model(nn.Module):
    """OLMo-style LayerNorm with a weight and bias=None (allenai OLMo layer_norm_with_affine, include_bias=False), bf16."""

    def __init__(self, d_model, eps=1e-5, seed=0):
        super().__init__()
        self.attn_norm = LayerNorm(d_model, eps=eps, elementwise_affine=True, bias=False)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.attn_norm.weight.copy_(1.0 + 0.1 * torch.randn(d_model, generator=g))
        self.to(torch.bfloat16)

    def forward(self, x):
        return self.attn_norm(x)
