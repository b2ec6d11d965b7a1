import torch
from torch import nn


class TopKLogitsWarper:
    def __init__(self, top_k: int, filter_value: float = -float("Inf"), min_tokens_to_keep: int = 1):
        if not isinstance(top_k, int) or top_k <= 0:
            raise ValueError(f"`top_k` has to be a strictly positive integer, but is {top_k}")

        self.top_k = max(top_k, min_tokens_to_keep)
        self.filter_value = filter_value

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        top_k = min(self.top_k, scores.size(-1))  # Safety check
        # Remove all tokens with a probability less than the last token of the top-k
        indices_to_remove = scores < torch.topk(scores, top_k)[0][..., -1, None]
        scores_processed = scores.masked_fill(indices_to_remove, self.filter_value)
        return scores_processed


class Model(nn.Module):
    """HF transformers TopKLogitsWarper (generation/logits_process.py): one top_k for the batch, a new tensor returned."""

    def __init__(self, top_k=50):
        super().__init__()
        self.warper = TopKLogitsWarper(top_k)

    def forward(self, input_ids, scores):
        return self.warper(input_ids, scores)
