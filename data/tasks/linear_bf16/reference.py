import math

import torch


class Model(torch.nn.Module):
    """Linear layer: y = x @ W^T (+ bias), bf16 in and out, fp32 accumulation.

    x: [num_tokens, in_features] bf16
    W: [out_features, in_features] bf16 parameter, randn / sqrt(in_features)
    bias: [out_features] bf16 parameter, 0.1 * randn (only when bias=True)
    y: [num_tokens, out_features] bf16

    The products are accumulated in fp32 (the bias added in fp32) and the result
    is rounded to bf16 once, as a tensor-core GEMM with an fp32 accumulator does.
    """

    def __init__(self, in_features, out_features, bias=False, seed=1234, device="cuda"):
        super().__init__()
        g = torch.Generator(device=device).manual_seed(seed)
        w = torch.randn(out_features, in_features, generator=g, device=device, dtype=torch.float32)
        w = w / math.sqrt(in_features)
        self.weight = torch.nn.Parameter(w.to(torch.bfloat16), requires_grad=False)
        if bias:
            b = 0.1 * torch.randn(out_features, generator=g, device=device, dtype=torch.float32)
            self.bias = torch.nn.Parameter(b.to(torch.bfloat16), requires_grad=False)
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        y = x.float() @ self.weight.float().t()
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype)
