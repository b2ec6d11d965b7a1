import torch


def _make_inputs(num_tokens, hidden_size, device="cuda"):
    g = torch.Generator(device=device).manual_seed(0)
    return {"x": torch.randn(num_tokens, hidden_size, generator=g, device=device).to(torch.bfloat16)}
