import torch


def _make_inputs(num_tokens, hidden_size, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(num_tokens, hidden_size, device="cuda", dtype=torch.float32)
    # real activations: 128-column groups with quite different ranges
    group_range = torch.rand(hidden_size // 128, device="cuda") * 4 + 0.25
    x = x * group_range.repeat_interleave(128)
    return {"x": x.to(torch.bfloat16)}
