import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    """x-transformers GLU (lucidrains): x, gate = proj_out.chunk(2, dim=-1); x * act(gate): the SiLU gates with the SECOND half."""

    def __init__(self):
        super().__init__()
        self.act = nn.SiLU()

    def forward(self, proj_out):
        x, gate = proj_out.chunk(2, dim = -1)
        return x * self.act(gate)
