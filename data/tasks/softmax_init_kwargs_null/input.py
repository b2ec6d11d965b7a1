import torch


def _make_inputs(rows, cols, device="cuda"):
    torch.manual_seed(1234)
    return {"scores": (2.0 * torch.randn(rows, cols, device=device)).bfloat16()}
