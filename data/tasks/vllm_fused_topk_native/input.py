import torch


def _make_inputs(num_tokens, hidden_size, num_experts, topk, renormalize, seed=0, device="cuda"):
    torch.manual_seed(seed)
    hidden_states = torch.randn(num_tokens, hidden_size, device=device, dtype=torch.bfloat16)
    gating_output = torch.randn(num_tokens, num_experts, device=device, dtype=torch.float32)
    return {"hidden_states": hidden_states, "gating_output": gating_output, "topk": int(topk), "renormalize": bool(renormalize)}
