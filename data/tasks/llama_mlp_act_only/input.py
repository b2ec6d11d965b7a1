import torch


def _make_inputs(batch_size, seq_len, intermediate_size):
    torch.manual_seed(0)
    gate_up = torch.randn(batch_size, seq_len, 2 * intermediate_size, device="cuda", dtype=torch.bfloat16)
    return {"gate_up": gate_up}
