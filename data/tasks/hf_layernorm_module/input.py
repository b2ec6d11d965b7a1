import torch


def _make_inputs(batch_size, seq_len, n_embd, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    hidden_states = torch.randn(batch_size, seq_len, n_embd, generator=g, device=device)
    return {"hidden_states": hidden_states.to(torch.bfloat16)}
