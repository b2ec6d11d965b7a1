import torch


def _make_inputs(num_seqs, vocab_size, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    # lm_head outputs upcast to fp32 (logits_processor: logits.float())
    logits = 2.0 * torch.randn(num_seqs, vocab_size, generator=g, device=device, dtype=torch.float32)
    return {"logits": logits}
