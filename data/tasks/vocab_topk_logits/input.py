import torch


def _make_inputs(num_seqs, vocab_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return {"logits": 4.0 * torch.randn(num_seqs, vocab_size, generator=g, device=device, dtype=torch.float32)}
