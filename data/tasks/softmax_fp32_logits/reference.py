import torch


class Model(torch.nn.Module):
    """Next-token probabilities from fp32 logits, as vLLM's sampler computes them: torch.softmax over the vocabulary."""

    def __init__(self):
        super().__init__()

    def forward(self, logits):
        probs = torch.softmax(logits, -1)
        return probs
