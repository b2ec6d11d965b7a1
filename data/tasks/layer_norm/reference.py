import torch


class Model(torch.nn.Module):
    """LayerNorm over the last dimension, with weight and bias.

    out = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias

    var is the biased (population) variance. Mean, variance, normalisation and
    the affine transform are computed in fp32; the result is rounded to bf16
    once. weight = 1 + 0.1 * randn and bias = 0.1 * randn, bf16 parameters of
    shape [hidden_size].
    """

    def __init__(self, hidden_size, eps=1e-5, seed=1234, device="cuda"):
        super().__init__()
        self.eps = eps
        g = torch.Generator(device=device).manual_seed(seed)
        w = 1.0 + 0.1 * torch.randn(hidden_size, generator=g, device=device, dtype=torch.float32)
        b = 0.1 * torch.randn(hidden_size, generator=g, device=device, dtype=torch.float32)
        self.weight = torch.nn.Parameter(w.to(torch.bfloat16), requires_grad=False)
        self.bias = torch.nn.Parameter(b.to(torch.bfloat16), requires_grad=False)

    def forward(self, x):
        # x: [num_tokens, hidden_size] bf16
        xf = x.float()
        mean = xf.mean(dim=-1, keepdim=True)
        var = xf.var(dim=-1, keepdim=True, correction=0)
        out = (xf - mean) * torch.rsqrt(var + self.eps)
        out = out * self.weight.float() + self.bias.float()
        return out.to(x.dtype)
