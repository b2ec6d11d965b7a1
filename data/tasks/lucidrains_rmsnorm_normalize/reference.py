import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.normalize(x, dim = -1) * self.scale * self.gamma


class Model(nn.Module):
    """RMSNorm written as F.normalize(x) * sqrt(dim) * gamma, fp32 (lucidrains x-transformers / research-code style)."""

    def __init__(self, dim, seed = 0):
        super().__init__()
        self.norm = RMSNorm(dim)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.norm.gamma.copy_(1.0 + 0.1 * torch.randn(dim, generator = g))

    def forward(self, x):
        return self.norm(x)
