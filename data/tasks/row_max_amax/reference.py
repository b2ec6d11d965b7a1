import torch


class Model(torch.nn.Module):
    """Row maximum kept as a column, x.amax(dim=-1, keepdim=True), the first step of a hand-written stable softmax or a max-logit probe; bf16 in and out."""

    def forward(self, x):
        return x.amax(dim=-1, keepdim=True)
