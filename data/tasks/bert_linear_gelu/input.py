import torch


def _make_inputs(batch_size, seq_len, hidden_size, device="cuda"):
    torch.manual_seed(0)
    return {"hidden_states": torch.randn(batch_size, seq_len, hidden_size, device=device, dtype=torch.bfloat16)}
