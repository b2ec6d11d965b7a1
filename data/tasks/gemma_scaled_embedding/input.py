import torch


def _make_inputs(batch_size, seq_len, vocab_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len), generator=g, device=device, dtype=torch.int64)
    return {"input_ids": input_ids}
