import torch


class Model(torch.nn.Module):
    """Top-k logprob candidates as a sampler gathers them: torch.topk over the vocabulary logits, NO softmax (values are raw logits, ids int64)."""

    def __init__(self, k=20):
        super().__init__()
        self.k = k

    def forward(self, logits):
        topk_logits, topk_ids = torch.topk(logits, self.k, dim=-1)
        return topk_logits, topk_ids
