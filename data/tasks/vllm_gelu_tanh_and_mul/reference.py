import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """vLLM GeluAndMul(approximate="tanh") forward_native (Gemma's gelu_pytorch_tanh MLP): gelu_tanh(x[..., :d]) * x[..., d:]."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate
        if approximate not in ("none", "tanh"):
            raise ValueError(f"Unknown approximate mode: {approximate}")

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        """PyTorch-native implementation equivalent to forward()."""
        d = x.shape[-1] // 2
        return F.gelu(x[..., :d], approximate=self.approximate) * x[..., d:]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_native(x)
