import torch
from torch import nn


class BertIntermediate(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.dense = nn.Linear(hidden_size, intermediate_size)
        self.intermediate_act_fn = nn.functional.gelu  # ACT2FN["gelu"]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.dense(hidden_states)
        hidden_states = self.intermediate_act_fn(hidden_states)
        return hidden_states


class Model(nn.Module):
    """HF transformers BertIntermediate: nn.Linear with bias followed by GELU (F.gelu(F.linear(x, W, b))), bf16."""

    def __init__(self, hidden_size, intermediate_size, seed=0):
        super().__init__()
        self.intermediate = BertIntermediate(hidden_size, intermediate_size)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.intermediate.dense.weight.copy_(torch.randn(intermediate_size, hidden_size, generator=g) / hidden_size ** 0.5)
            self.intermediate.dense.bias.copy_(0.1 * torch.randn(intermediate_size, generator=g))
        self.to(torch.bfloat16)

    def forward(self, hidden_states):
        return self.intermediate(hidden_states)
