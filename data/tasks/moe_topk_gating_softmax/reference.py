import torch


class Model(torch.nn.Module):
    """MoE router: softmax over experts, then top-k (vLLM topk_softmax semantics).

    gating_output [num_tokens, num_experts] fp32 (router logits)
      probs        = softmax(gating_output, dim=-1)            fp32
      topk_weights = the k largest probs per token, descending  fp32 [num_tokens, topk]
      topk_ids     = their expert indices                       int32 [num_tokens, topk]
      if renormalize: topk_weights /= topk_weights.sum(dim=-1)

    Returns (topk_weights, topk_ids). With random fp32 logits exact ties are
    practically absent, so the order is well defined (vLLM's kernel prefers the
    lower expert index on a tie; torch.topk does not promise an order there).
    """

    def __init__(self, topk, renormalize=False):
        super().__init__()
        self.topk = topk
        self.renormalize = renormalize

    def forward(self, gating_output):
        probs = torch.softmax(gating_output.float(), dim=-1)
        topk_weights, topk_ids = torch.topk(probs, self.topk, dim=-1, largest=True, sorted=True)
        if self.renormalize:
            topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
        return topk_weights, topk_ids.to(torch.int32)
