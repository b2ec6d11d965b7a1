import torch


def _make_inputs(batch_size, vocab_size, prompt_len=16, dtype="fp32", seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    input_ids = torch.randint(0, vocab_size, (batch_size, prompt_len), generator=g, device=device)
    scores = (3.0 * torch.randn(batch_size, vocab_size, generator=g, device=device)).to(torch_dtype)
    return {"input_ids": input_ids, "scores": scores}
