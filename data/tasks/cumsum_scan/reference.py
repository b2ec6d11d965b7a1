import torch


class Model(torch.nn.Module):
    """Inclusive prefix sum along the last dim in fp32 (torch.cumsum(x.float(), dim=-1)), as segment-sum / cumulative-probability code writes it."""

    def forward(self, x):
        return torch.cumsum(x.float(), dim=-1)
