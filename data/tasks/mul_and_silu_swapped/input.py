import torch


def _make_inputs(batch, seq_len, dim_inner, device="cuda"):
    torch.manual_seed(0)
    return {"proj_out": torch.randn(batch, seq_len, 2 * dim_inner, device=device).bfloat16()}
