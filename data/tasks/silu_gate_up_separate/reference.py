import torch
from torch import nn


class Model(nn.Module):
    """HF LlamaMLP activation with separate gate_proj and up_proj outputs: act_fn(gate) * up, gate and up passed as two tensors."""

    def __init__(self):
        super().__init__()
        self.act_fn = nn.SiLU()

    def forward(self, gate, up):
        return self.act_fn(gate) * up
