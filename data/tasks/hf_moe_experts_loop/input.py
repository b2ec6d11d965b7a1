import torch


def _make_inputs(num_tokens, hidden_size, num_experts, topk, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    hidden_states = (torch.randn(num_tokens, hidden_size, generator=g, device=device) * 0.5).to(torch.bfloat16)  # post-RMSNorm rows
    # The router (MixtralTopKRouter): softmax over the experts in fp32, top-k, renormalised
    router_logits = torch.randn(num_tokens, num_experts, generator=g, device=device, dtype=torch.float32)
    probs = torch.softmax(router_logits, dim=-1)
    top_k_weights, top_k_index = torch.topk(probs, topk, dim=-1)
    top_k_weights = top_k_weights / top_k_weights.sum(dim=-1, keepdim=True)
    return {"hidden_states": hidden_states, "top_k_index": top_k_index, "top_k_weights": top_k_weights}
