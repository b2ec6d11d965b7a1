import torch


def _make_inputs(batch_size, num_heads, q_len, kv_len):
    torch.manual_seed(0)
    # q @ k^T * head_dim**-0.5 for unit-variance q and k: unit-variance scores
    attn_weights = torch.randn(batch_size, num_heads, q_len, kv_len, device="cuda", dtype=torch.bfloat16)
    return {"attn_weights": attn_weights}
