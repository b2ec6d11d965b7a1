import torch
import torch.nn as nn


class Model(nn.Module):
    """vLLM RMSNorm(hidden_size, has_weight=False) through forward_native: normalises, no learned scale."""

    def __init__(self, hidden_size: int, eps: float = 1e-6, has_weight: bool = False) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.variance_epsilon = eps
        self.has_weight = has_weight
        self.weight = None
        if self.has_weight:
            self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        orig_dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        x = x.to(orig_dtype)
        if self.has_weight:
            x = x * self.weight
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_native(x)
