import torch


def _make_inputs(num_tokens, hidden_size, intermediate_size, num_experts, topk, block_size=(128, 128), seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    fp8_info = torch.finfo(torch.float8_e4m3fn)
    block_n, block_k = block_size

    # As vLLM's block-fp8 MoE tests: weight values over the whole e4m3 range, one fp32 scale per 128 x 128 block. The
    # scales here are drawn around fan_in ** -0.5 / std(values) (not vLLM's [0, 1e-2)), so each projection keeps its
    # input's magnitude and the bf16 outputs are of order 0.1 to 1: the comparison's atol of 1e-2 does not hide them.
    def weight(e, n, k):
        values = ((torch.rand(e, n, k, generator=g, device=device) - 0.5) * 2 * fp8_info.max).clamp(min=fp8_info.min, max=fp8_info.max)
        scales = (torch.rand(e, (n + block_n - 1) // block_n, (k + block_k - 1) // block_k, generator=g, device=device) + 0.5)
        return values.to(torch.float8_e4m3fn), scales * (k ** -0.5) * (3 ** 0.5) / fp8_info.max

    hidden_states = torch.randn(num_tokens, hidden_size, generator=g, device=device).to(torch.bfloat16)
    w1, w1_scale = weight(num_experts, 2 * intermediate_size, hidden_size)
    w2, w2_scale = weight(num_experts, hidden_size, intermediate_size)
    # fused_topk: softmax over the router's logits, top-k, renormalised; int32 ids
    score = torch.randn(num_tokens, num_experts, generator=g, device=device, dtype=torch.float32)
    topk_weights, topk_ids = torch.topk(torch.softmax(score, dim=-1), topk, dim=-1)
    topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return {"hidden_states": hidden_states, "w1": w1, "w2": w2, "w1_scale": w1_scale, "w2_scale": w2_scale,
            "topk_weights": topk_weights, "topk_ids": topk_ids.to(torch.int32)}
