import torch


def _make_inputs(num_tokens, hidden_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(num_tokens, hidden_size, generator=g, device=device).to(torch.bfloat16)
    # a calibrated activation scale, as loaded from the checkpoint (input_scale)
    scale = torch.tensor([6.0 / 448.0], dtype=torch.float32, device=device)
    return {"x": x, "scale": scale}
