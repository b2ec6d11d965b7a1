import torch


class Model(torch.nn.Module):
    """Sampled-token logprobs as vLLM's sampler computes them: log_softmax of fp32 logits over the vocabulary."""

    def __init__(self):
        super().__init__()

    def forward(self, logits):
        logprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float)
        return logprobs
