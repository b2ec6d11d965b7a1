import torch


def _make_inputs(num_tokens, hidden_size=7168, n_routed_experts=256, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    hidden_states = torch.randn(num_tokens, hidden_size, generator=g, device=device).to(torch.bfloat16)
    router_logits = torch.randn(num_tokens, n_routed_experts, generator=g, device=device, dtype=torch.float32)
    return {"hidden_states": hidden_states, "router_logits": router_logits}
