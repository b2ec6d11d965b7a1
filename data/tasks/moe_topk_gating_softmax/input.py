import torch


def _make_inputs(num_tokens, num_experts, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    gating_output = torch.randn(num_tokens, num_experts, generator=g, device=device, dtype=torch.float32)
    return {"gating_output": gating_output}
