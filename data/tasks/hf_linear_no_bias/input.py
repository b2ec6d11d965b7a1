import torch


def _make_inputs(batch_size, seq_len, hidden_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return {"hidden_states": torch.randn(batch_size, seq_len, hidden_size, generator=g, device=device).to(torch.bfloat16)}
