import torch


def _make_inputs(num_tokens, num_experts=8, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return {"router_logits": torch.randn(num_tokens, num_experts, generator=g, device=device, dtype=torch.float32)}
