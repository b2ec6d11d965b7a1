import torch


def _make_inputs(batch_size, prompt_len, vocab_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    input_ids = torch.randint(0, vocab_size, (batch_size, prompt_len), generator=g, device=device)
    scores = 3.0 * torch.randn(batch_size, vocab_size, generator=g, device=device)
    return {"input_ids": input_ids, "scores": scores}
