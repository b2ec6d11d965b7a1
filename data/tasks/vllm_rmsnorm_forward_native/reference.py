from typing import Optional, Tuple, Union

import torch
import torch.nn as nn


class Model(nn.Module):
    """vLLM RMSNorm (model_executor/layers/layernorm.py) through forward_native, called without a residual."""

    def __init__(self, hidden_size: int, eps: float = 1e-6, seed: int = 0) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.variance_epsilon = eps
        self.has_weight = True
        self.weight = nn.Parameter(torch.ones(hidden_size, dtype=torch.bfloat16))
        # weight_loader stand-in: deterministic "checkpoint" values
        g = torch.Generator().manual_seed(seed)
        self.weight.data.copy_(1.0 + 0.1 * torch.randn(hidden_size, generator=g))

    def forward_native(
        self,
        x: torch.Tensor,
        residual: Optional[torch.Tensor] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """PyTorch-native implementation equivalent to forward()."""
        orig_dtype = x.dtype
        x = x.to(torch.float32)
        if residual is not None:
            x = x + residual.to(torch.float32)
            residual = x.to(orig_dtype)

        hidden_size = x.shape[-1]
        if hidden_size != self.hidden_size:
            raise ValueError("Expected hidden_size to be "
                             f"{self.hidden_size}, but found: {hidden_size}")

        variance = x.pow(2).mean(dim=-1, keepdim=True)

        x = x * torch.rsqrt(variance + self.variance_epsilon)
        x = x.to(orig_dtype)
        if self.has_weight:
            x = x * self.weight
        if residual is None:
            return x
        else:
            return x, residual

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        return self.forward_native(x, residual)
