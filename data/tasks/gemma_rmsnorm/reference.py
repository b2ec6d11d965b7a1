import torch
from torch import nn


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        # Llama does x.to(float16) * w whilst Gemma is (x * w).to(float16)
        # See https://github.com/huggingface/transformers/pull/29402
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)

    def extra_repr(self):
        return f"{tuple(self.weight.shape)}, eps={self.eps}"


class Model(nn.Module):
    """HF transformers GemmaRMSNorm (modeling_gemma.py): scales by (1 + weight), the weight stored as an offset from 1."""

    def __init__(self, hidden_size, rms_norm_eps=1e-6, seed=0):
        super().__init__()
        self.input_layernorm = GemmaRMSNorm(hidden_size, eps=rms_norm_eps)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.input_layernorm.weight.copy_(0.1 * torch.randn(hidden_size, generator=g))
        self.to(torch.bfloat16)

    def forward(self, hidden_states):
        return self.input_layernorm(hidden_states)
