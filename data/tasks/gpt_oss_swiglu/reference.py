import torch


def swiglu(x, alpha: float = 1.702, limit: float = 7.0):
    x_glu, x_linear = x[..., ::2], x[..., 1::2]
    # Clamp the input values
    x_glu = x_glu.clamp(min=None, max=limit)
    x_linear = x_linear.clamp(min=-limit, max=limit)
    out_glu = x_glu * torch.sigmoid(alpha * x_glu)
    # Note we add an extra bias of 1 to the linear layer
    return out_glu * (x_linear + 1)


class Model(torch.nn.Module):
    """gpt-oss MLPBlock swiglu (gpt_oss/torch/model.py): interleaved gate/linear columns, sigmoid(1.702 x) gate, clamps at 7, (x_linear + 1)."""

    def __init__(self, swiglu_limit: float = 7.0):
        super().__init__()
        self.swiglu_limit = swiglu_limit

    def forward(self, x):
        # x: the mlp1 output, [num_tokens, 2 * intermediate_size], gate/linear interleaved
        return swiglu(x, limit=self.swiglu_limit)
