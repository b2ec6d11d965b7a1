import torch


def _make_inputs(seq_len, num_queries, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return {"scores": 3.0 * torch.randn(seq_len, num_queries, generator=g, device=device).to(torch.bfloat16)}
