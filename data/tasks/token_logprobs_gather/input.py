import torch


def _make_inputs(num_tokens, vocab_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    logits = 3.0 * torch.randn(num_tokens, vocab_size, generator=g, device=device, dtype=torch.float32)
    token_ids = torch.randint(0, vocab_size, (num_tokens,), generator=g, device=device, dtype=torch.int64)
    return {"logits": logits, "token_ids": token_ids}
