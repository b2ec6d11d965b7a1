import torch


def _make_inputs(batch_size, seq_len, num_heads, num_kv_heads, head_dim=128, past_len=0):
    torch.manual_seed(0)
    query_states = torch.randn(batch_size, num_heads, seq_len, head_dim, device="cuda", dtype=torch.bfloat16)
    key_states = torch.randn(batch_size, num_kv_heads, seq_len, head_dim, device="cuda", dtype=torch.bfloat16)
    position_ids = torch.arange(past_len, past_len + seq_len, device="cuda").unsqueeze(0).expand(batch_size, -1)
    return {"query_states": query_states, "key_states": key_states, "position_ids": position_ids}
