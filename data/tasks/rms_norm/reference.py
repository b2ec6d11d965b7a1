import torch


class Model(torch.nn.Module):
    """RMSNorm over the last dimension (LLaMA-style).

    out = x / sqrt(mean(x^2) + eps) * weight

    Statistics and the scaling are computed in fp32; the result is rounded to the
    input dtype (bf16) once. weight is a bf16 parameter of shape [hidden_size],
    initialised deterministically to 1 + 0.1 * randn.
    """

    def __init__(self, hidden_size, eps=1e-6, seed=1234, device="cuda"):
        super().__init__()
        self.eps = eps
        g = torch.Generator(device=device).manual_seed(seed)
        w = 1.0 + 0.1 * torch.randn(hidden_size, generator=g, device=device, dtype=torch.float32)
        self.weight = torch.nn.Parameter(w.to(torch.bfloat16), requires_grad=False)

    def forward(self, x):
        # x: [num_tokens, hidden_size] bf16
        xf = x.float()
        variance = xf.pow(2).mean(dim=-1, keepdim=True)
        out = xf * torch.rsqrt(variance + self.eps) * self.weight.float()
        return out.to(x.dtype)
