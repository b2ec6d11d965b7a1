import torch
import torch.nn.functional as F
from torch import nn


def silu_and_mul(x):
    # vLLM SiluAndMul.forward_native
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


class Model(nn.Module):
    """vLLM's torch-native fused_experts reference (tests/kernels/moe torch_experts): each token repeated k times, rows masked per
    expert, a @ w1[e].T then SiluAndMul then @ w2[e].T, the [M, k, H] slot outputs times the top-k weights summed over k."""

    def forward(self, hidden_states, w1, w2, topk_weights, topk_ids):
        # hidden_states [M, K] bf16; w1 [E, 2N, K]; w2 [E, K, N]; topk_weights [M, topk] fp32; topk_ids [M, topk] int32
        M, K = hidden_states.shape
        topk = topk_ids.shape[1]
        a = hidden_states.view(M, -1, K).repeat(1, topk, 1).reshape(-1, K)
        out = torch.zeros(M * topk, w2.shape[1], dtype=a.dtype, device=a.device)
        flat_weights = topk_weights.view(-1)
        flat_ids = topk_ids.view(-1)
        for i in range(w1.shape[0]):
            mask = flat_ids == i
            if mask.sum():
                out[mask] = silu_and_mul(a[mask] @ w1[i].transpose(0, 1)) @ w2[i].transpose(0, 1)
        return (out.view(M, -1, w2.shape[1]) * flat_weights.view(M, -1, 1).to(out.dtype)).sum(dim=1)
