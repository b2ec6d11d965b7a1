import torch


class Model(torch.nn.Module):
    """Row sum over the last dimension, bf16 in and out, fp32 inside.

    y[t] = sum_j x[t, j]

    The sum is accumulated in fp32 and rounded to bf16 once.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x):
        # x: [num_tokens, hidden_size] bf16; y: [num_tokens] bf16
        return x.float().sum(dim=-1).to(x.dtype)
