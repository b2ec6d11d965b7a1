import torch


def _make_inputs(batch_size, num_heads, seq_len, device="cuda"):
    torch.manual_seed(0)
    attn_weights = torch.randn(batch_size, num_heads, seq_len, seq_len, device=device).to(torch.bfloat16)
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
    attention_mask = causal[None, None, :, :].expand(batch_size, 1, seq_len, seq_len)
    return {"attn_weights": attn_weights, "attention_mask": attention_mask}
