import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    """Functional LayerNorm with weight and bias passed in, fp32 (apex / Megatron test-reference style: F.layer_norm(x, (H,), w, b, eps))."""

    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight, bias):
        return F.layer_norm(x, (x.shape[-1],), weight, bias, self.eps)
