import torch


def grouped_topk(hidden_states, gating_output, topk, renormalize, num_expert_group=0, topk_group=0,
                 scoring_func="softmax", routed_scaling_factor=1.0, e_score_correction_bias=None):
    assert hidden_states.shape[0] == gating_output.shape[0], "Number of tokens mismatch"

    if scoring_func == "softmax":
        scores = torch.softmax(gating_output, dim=-1)
    elif scoring_func == "sigmoid":
        scores = gating_output.sigmoid()
    else:
        raise ValueError(f"Unsupported scoring function: {scoring_func}")

    num_token = scores.shape[0]
    if e_score_correction_bias is not None:
        # Store original scores before applying correction bias. We use biased
        # scores for expert selection but original scores for routing weights
        original_scores = scores
        scores = scores + e_score_correction_bias.unsqueeze(0)
        group_scores = (scores.view(num_token, num_expert_group, -1).topk(2, dim=-1)[0].sum(dim=-1))
    else:
        group_scores = scores.view(num_token, num_expert_group, -1).max(dim=-1).values  # [n, n_group]
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]  # [n, top_k_group]
    group_mask = torch.zeros_like(group_scores)  # [n, n_group]
    group_mask.scatter_(1, group_idx, 1)  # [n, n_group]
    score_mask = group_mask.unsqueeze(-1).expand(
        num_token, num_expert_group, scores.shape[-1] // num_expert_group).reshape(num_token, -1)  # [n, e]
    tmp_scores = scores.masked_fill(~score_mask.bool(), float("-inf"))  # [n, e]

    if e_score_correction_bias is not None:
        topk_ids = torch.topk(tmp_scores, k=topk, dim=-1, sorted=False)[1]
        # Use original unbiased scores for the routing weights
        topk_weights = original_scores.gather(1, topk_ids)
    else:
        topk_weights, topk_ids = torch.topk(tmp_scores, k=topk, dim=-1, sorted=False)

    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)

    if routed_scaling_factor != 1.0:
        topk_weights = topk_weights * routed_scaling_factor
    return topk_weights.to(torch.float32), topk_ids.to(torch.int32)


class Model(torch.nn.Module):
    """DeepSeek-V3 router (vLLM grouped_topk, scoring_func="sigmoid", e_score_correction_bias): sigmoid scores, group-limited top-k, weights scaled by routed_scaling_factor."""

    def __init__(self, n_routed_experts=256, num_experts_per_tok=8, n_group=8, topk_group=4, norm_topk_prob=True,
                 routed_scaling_factor=2.5, seed=0):
        super().__init__()
        self.top_k = num_experts_per_tok
        self.n_group = n_group
        self.topk_group = topk_group
        self.norm_topk_prob = norm_topk_prob
        self.routed_scaling_factor = routed_scaling_factor
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("e_score_correction_bias", 0.05 * torch.randn(n_routed_experts, generator=g))

    def forward(self, hidden_states, router_logits):
        return grouped_topk(hidden_states, router_logits, self.top_k, self.norm_topk_prob,
                            num_expert_group=self.n_group, topk_group=self.topk_group,
                            scoring_func="sigmoid", routed_scaling_factor=self.routed_scaling_factor,
                            e_score_correction_bias=self.e_score_correction_bias)
