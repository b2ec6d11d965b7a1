import torch


def _make_inputs(num_tokens, hidden_size, intermediate_size, num_experts, topk, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = torch.bfloat16
    # vLLM's MoE tests draw randn activations and weights; the weights here are scaled by fan_in ** -0.5 so every
    # projection keeps its input's magnitude; activations of std 0.5 (outputs of order 0.1: the references' own bf16
    # roundings of the k slot products stay well inside the tolerance)
    hidden_states = (torch.randn(num_tokens, hidden_size, generator=g, device=device) * 0.5).to(dtype)
    w1 = (torch.randn(num_experts, 2 * intermediate_size, hidden_size, generator=g, device=device) * hidden_size ** -0.5).to(dtype)
    w2 = (torch.randn(num_experts, hidden_size, intermediate_size, generator=g, device=device) * intermediate_size ** -0.5).to(dtype)
    # fused_topk: softmax over the router's logits, top-k, renormalised; int32 ids
    score = torch.randn(num_tokens, num_experts, generator=g, device=device, dtype=torch.float32)
    topk_weights, topk_ids = torch.topk(torch.softmax(score, dim=-1), topk, dim=-1)
    topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return {"hidden_states": hidden_states, "w1": w1, "w2": w2, "topk_weights": topk_weights, "topk_ids": topk_ids.to(torch.int32)}
