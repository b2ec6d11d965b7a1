import torch


def _make_inputs(num_seqs, vocab_size, device="cuda"):
    g = torch.Generator(device=device).manual_seed(0)
    return {"logits": torch.randn(num_seqs, vocab_size, generator=g, device=device, dtype=torch.float32)}
