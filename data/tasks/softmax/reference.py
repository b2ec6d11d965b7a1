import torch


class Model(torch.nn.Module):
    """Softmax over the last dimension, bf16 in and out, fp32 inside.

    y[i, j] = exp(x[i, j] - max_j x[i, :]) / sum_j exp(x[i, j] - max_j x[i, :])

    The max, exponentials and the sum are computed in fp32 (numerically stable,
    max-subtracted); the result is rounded to bf16 once.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x):
        # x: [num_tokens, hidden_size] bf16 (hidden_size = row length)
        y = torch.softmax(x.float(), dim=-1)
        return y.to(x.dtype)
