import torch


def _make_inputs(num_tokens, num_blocks, num_kv_heads=8, head_size=128, block_size=16, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    key = torch.randn(num_tokens, num_kv_heads, head_size, generator=g, device=device).to(torch.bfloat16)
    value = torch.randn(num_tokens, num_kv_heads, head_size, generator=g, device=device).to(torch.bfloat16)
    key_cache = torch.zeros(num_blocks, block_size, num_kv_heads, head_size, device=device, dtype=torch.bfloat16)
    value_cache = torch.zeros_like(key_cache)
    # distinct slots, as the scheduler hands them out
    slot_mapping = torch.randperm(num_blocks * block_size, generator=g, device=device)[:num_tokens].to(torch.long)
    return {"key": key, "value": value, "key_cache": key_cache, "value_cache": value_cache, "slot_mapping": slot_mapping}
