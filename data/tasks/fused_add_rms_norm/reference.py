import torch


class Model(torch.nn.Module):
    """Residual add fused with RMSNorm (vLLM fused_add_rms_norm semantics).

    residual_updated = x + residual     (summed in fp32, rounded to bf16,
                                         written IN PLACE into `residual`)
    out = residual_updated / sqrt(mean(residual_updated^2) + eps) * weight

    The norm reads the rounded bf16 residual_updated (what the kernel stores),
    computes statistics and scaling in fp32 and rounds the result to bf16 once.
    weight is a bf16 parameter of shape [hidden_size], 1 + 0.1 * randn.

    Returns (out, residual_updated); residual_updated is the `residual` tensor
    itself, modified in place. `x` is not modified.
    """

    def __init__(self, hidden_size, eps=1e-6, seed=1234, device="cuda"):
        super().__init__()
        self.eps = eps
        g = torch.Generator(device=device).manual_seed(seed)
        w = 1.0 + 0.1 * torch.randn(hidden_size, generator=g, device=device, dtype=torch.float32)
        self.weight = torch.nn.Parameter(w.to(torch.bfloat16), requires_grad=False)

    def forward(self, x, residual):
        # x, residual: [num_tokens, hidden_size] bf16
        updated = (x.float() + residual.float()).to(residual.dtype)
        residual.copy_(updated)  # in-place residual update

        r = residual.float()
        variance = r.pow(2).mean(dim=-1, keepdim=True)
        out = r * torch.rsqrt(variance + self.eps) * self.weight.float()
        return out.to(x.dtype), residual
