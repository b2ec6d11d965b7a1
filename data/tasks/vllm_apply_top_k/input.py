import torch


def _make_inputs(num_seqs, vocab_size, max_k=100, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    logits = 4.0 * torch.randn(num_seqs, vocab_size, generator=g, device=device, dtype=torch.float32)
    # Each request's own top_k; requests that set none carry k = vocab_size (as the sampler fills them).
    k = torch.randint(1, max_k + 1, (num_seqs,), generator=g, device=device, dtype=torch.int64)
    k[::4] = vocab_size
    return {"logits": logits, "k": k}
