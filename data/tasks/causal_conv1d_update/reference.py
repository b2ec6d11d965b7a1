import torch
import torch.nn.functional as F


def causal_conv1d_update_ref(x, conv_state, weight, bias=None, activation=None):
    """
    x: (batch, dim)
    conv_state: (batch, dim, width)
    weight: (dim, width)
    bias: (dim,)

    out: (batch, dim)
    """
    if activation not in [None, "silu", "swish"]:
        raise NotImplementedError("activation must be None, silu, or swish")
    dtype_in = x.dtype
    batch, dim = x.shape
    width = weight.shape[1]
    assert conv_state.shape == (batch, dim, width)
    assert weight.shape == (dim, width)
    conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))  # Update state (B D W)
    conv_state[:, :, -1] = x
    out = torch.sum(conv_state * weight, dim=-1)  # (B D)
    if bias is not None:
        out += bias
    return (out if activation is None else F.silu(out)).to(dtype=dtype_in)


class Model(torch.nn.Module):
    """Mamba decode-step depthwise causal conv1d (causal-conv1d's causal_conv1d_update_ref): conv_state rolled and updated in place, silu."""

    def __init__(self, d_inner, d_conv=4, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = torch.nn.Parameter((torch.randn(d_inner, d_conv, generator=g) / d_conv ** 0.5).to(torch.bfloat16))
        self.bias = torch.nn.Parameter((0.1 * torch.randn(d_inner, generator=g)).to(torch.bfloat16))

    def forward(self, x, conv_state):
        return causal_conv1d_update_ref(x, conv_state, self.weight, self.bias, activation="silu")
