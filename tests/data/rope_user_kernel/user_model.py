# A user's Python Model for the RoPE task, written another way (complex rotation by halves).
import torch


class Model(torch.nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        self.head_dim, self.base = head_dim, base

    def forward(self, x, positions):
        half = self.head_dim // 2
        inv = self.base ** (-torch.arange(half, dtype=torch.float64, device=x.device) * 2 / self.head_dim)
        angle = positions.double()[:, None, None] * inv[None, None, :]
        a, b = x.double()[..., :half], x.double()[..., half:]
        c, s = torch.cos(angle), torch.sin(angle)
        return torch.cat((a * c - b * s, b * c + a * s), dim=-1).to(x.dtype)
