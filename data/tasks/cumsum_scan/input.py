import torch


def _make_inputs(num_rows, length, device="cuda"):
    torch.manual_seed(0)
    return {"x": torch.randn(num_rows, length, device=device, dtype=torch.bfloat16)}
