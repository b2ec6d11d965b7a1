import torch


def _make_inputs(batch_size, seq_len, hidden_size):
    torch.manual_seed(0)
    hidden_states = torch.randn(batch_size, seq_len, hidden_size, dtype=torch.bfloat16, device="cuda")
    return {"hidden_states": hidden_states}
