import torch


def _make_inputs(num_tokens, num_experts, seed=0, device="cuda"):
    gen = torch.Generator(device=device).manual_seed(seed)
    return {"g": torch.randn(num_tokens, num_experts, generator=gen, device=device)}
