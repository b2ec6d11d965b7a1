import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """vLLM SiluAndMul (model_executor/layers/activation.py) through forward_native: silu(x[..., :d]) * x[..., d:]."""

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        """PyTorch-native implementation equivalent to forward()."""
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_native(x)
