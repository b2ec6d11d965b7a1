import torch


def _make_inputs(num_tokens, hidden_size, seed=0, device="cuda"):
    torch.manual_seed(seed)
    hidden_states = torch.randn(num_tokens, hidden_size, device=device, dtype=torch.bfloat16)
    residual = torch.randn(num_tokens, hidden_size, device=device, dtype=torch.bfloat16)
    return {"hidden_states": hidden_states, "residual": residual}
