import torch


def _make_inputs(batch, seq_len, dim, device="cuda"):
    torch.manual_seed(42)
    return {"x": torch.randn(batch, seq_len, dim, device=device)}
