import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.hidden_size = hidden_size
        self.variance_epsilon = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward_native(self, x, residual=None):
        orig_dtype = x.dtype
        x = x.to(torch.float32)
        if residual is not None:
            x = x + residual.to(torch.float32)
            residual = x.to(orig_dtype)

        hidden_size = x.shape[-1]
        if hidden_size != self.hidden_size:
            raise ValueError(f"Expected hidden_size to be {self.hidden_size}, but found: {hidden_size}")

        variance = x.pow(2).mean(dim=-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        x = x.to(orig_dtype)
        x = x * self.weight
        if residual is None:
            return x
        return x, residual

    def forward(self, x, residual=None):
        return self.forward_native(x, residual)


class Model(nn.Module):
    """Qwen3 per-head query norm: RMSNorm over head_dim of q viewed as [T, heads, head_dim] (vLLM qwen3.py Qwen3Attention style)."""

    def __init__(self, num_heads, head_dim=128, rms_norm_eps=1e-6, seed=0):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.q_norm = RMSNorm(self.head_dim, eps=rms_norm_eps)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.q_norm.weight.copy_(1.0 + 0.1 * torch.randn(head_dim, generator=g))
        self.q_norm.to(torch.bfloat16)

    def forward(self, q):
        # q: [num_tokens, num_heads * head_dim], the query slice of the qkv projection
        q_by_head = q.view(*q.shape[:-1], q.shape[-1] // self.head_dim, self.head_dim)
        q_by_head = self.q_norm(q_by_head)
        q = q_by_head.view(q.shape)
        return q
