import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    """HF transformers MixtralExperts / Qwen2MoeExperts (v5 stacked experts): a loop over the experts hit, index_select of their
    tokens, F.linear gate_up then chunk, SiLU(gate) * up, F.linear down, times the routing weight, index_add_ into the output."""

    def __init__(self, num_experts=8, hidden_size=1024, intermediate_size=768, seed=0):
        super().__init__()
        self.num_experts = num_experts
        self.gate_up_proj = nn.Parameter(torch.empty(num_experts, 2 * intermediate_size, hidden_size))
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden_size, intermediate_size))
        self.act_fn = nn.SiLU()
        # normal(0, fan_in ** -0.5) from a fixed generator (nn.Linear's scale), so each projection keeps its input's magnitude
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.gate_up_proj.copy_(torch.randn(self.gate_up_proj.shape, generator=g) * hidden_size ** -0.5)
            self.down_proj.copy_(torch.randn(self.down_proj.shape, generator=g) * intermediate_size ** -0.5)
        self.to(torch.bfloat16)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        # hidden_states [T, H] bf16; top_k_index [T, k] int64 and top_k_weights [T, k] fp32 from the router
        final_hidden_states = torch.zeros_like(hidden_states)
        with torch.no_grad():
            expert_mask = F.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)  # [E, k, T]
            expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_idx = expert_idx[0]
            top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
            current_state = hidden_states.index_select(0, token_idx)
            gate, up = F.linear(current_state, self.gate_up_proj[expert_idx]).chunk(2, dim=-1)
            current_hidden_states = self.act_fn(gate) * up
            current_hidden_states = F.linear(current_hidden_states, self.down_proj[expert_idx])
            current_hidden_states = current_hidden_states * top_k_weights[token_idx, top_k_pos, None]
            final_hidden_states.index_add_(0, token_idx, current_hidden_states.to(final_hidden_states.dtype))
        return final_hidden_states
