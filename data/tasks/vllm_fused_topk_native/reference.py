import torch


class Model(torch.nn.Module):
    """vLLM fused_topk(hidden_states, gating_output, topk, renormalize) with a torch stand-in for ops.topk_softmax; topk and renormalize arrive as plain Python values."""

    def forward(self, hidden_states, gating_output, topk, renormalize):
        assert hidden_states.shape[0] == gating_output.shape[0], "Number of tokens mismatch"

        M, _ = hidden_states.shape

        topk_weights = torch.empty(M, topk, dtype=torch.float32, device=hidden_states.device)
        topk_ids = torch.empty(M, topk, dtype=torch.int32, device=hidden_states.device)

        # ops.topk_softmax(topk_weights, topk_ids, token_expert_indicies, gating_output.float())
        probs = torch.softmax(gating_output.float(), dim=-1)
        values, indices = torch.topk(probs, topk, dim=-1)
        topk_weights.copy_(values)
        topk_ids.copy_(indices)

        if renormalize:
            topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)

        return topk_weights, topk_ids
