import torch


class Model(torch.nn.Module):
    """Attention pooling weights over the sequence: softmax over dim 0 (the token axis) of [seq_len, num_queries] scores, research-code style."""

    def forward(self, scores):
        weights = torch.softmax(scores.float(), dim=0)
        return weights.to(scores.dtype)
