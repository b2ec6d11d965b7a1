import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    """Mixtral sparse-MoE routing (HF MixtralSparseMoeBlock): softmax over experts in fp32, top-k, renormalise; router logits in, a dict out."""

    def __init__(self, num_local_experts=8, num_experts_per_tok=2):
        super().__init__()
        self.num_experts = num_local_experts
        self.top_k = num_experts_per_tok

    def forward(self, router_logits):
        # router_logits: (batch * sequence_length, n_experts), fp32
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        # int32 ids, as the fused expert kernels take them
        return {"topk_weights": routing_weights, "topk_ids": selected_experts.to(torch.int32)}
