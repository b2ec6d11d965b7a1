import torch


class Model(torch.nn.Module):
    """gpt-oss MLPBlock routing (gpt_oss/torch/model.py): top-k of the router logits FIRST, then softmax over the k selected."""

    def __init__(self, num_experts: int = 32, experts_per_token: int = 4):
        super().__init__()
        self.num_experts = num_experts
        self.experts_per_token = experts_per_token

    def forward(self, g):
        # g: self.gate(t), router logits [num_tokens, num_experts], fp32
        experts = torch.topk(g, k=self.experts_per_token, dim=-1, sorted=True)
        expert_weights = torch.nn.functional.softmax(experts.values, dim=1)
        expert_indices = experts.indices
        return expert_weights, expert_indices.to(torch.int32)
