import torch
from torch import nn


class Model(nn.Module):
    """The activation of HF Phi3MLP: gate, up_states = up_states.chunk(2, dim=-1); up_states * activation_fn(gate)."""

    def __init__(self):
        super().__init__()
        self.activation_fn = nn.SiLU()

    def forward(self, up_states):
        # up_states: output of gate_up_proj, [num_tokens, 2 * intermediate_size]
        gate, up_states = up_states.chunk(2, dim=-1)
        up_states = up_states * self.activation_fn(gate)
        return up_states
