import torch
from torch import nn


class Model(nn.Module):
    """The activation of HF LlamaMLP on a fused gate_up projection: act_fn(gate) * up with ACT2FN["silu"] (nn.SiLU), gate half first."""

    def __init__(self, hidden_act="silu"):
        super().__init__()
        if hidden_act != "silu":
            raise ValueError(f"unsupported hidden_act {hidden_act}")
        self.act_fn = nn.SiLU()

    def forward(self, gate_up):
        d = gate_up.shape[-1] // 2
        return self.act_fn(gate_up[..., :d]) * gate_up[..., d:]
