import torch


def _make_inputs(batch_size, hidden_size, dtype="bf16", seed=0, device="cuda"):
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(batch_size, hidden_size, generator=g, device=device).to(torch_dtype)
    w = (1.0 + 0.1 * torch.randn(hidden_size, generator=g, device=device)).to(torch_dtype)
    return {"input": x, "weight": w}
