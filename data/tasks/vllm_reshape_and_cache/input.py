import torch


def _make_inputs(num_tokens, num_blocks, num_kv_heads=8, head_size=128, block_size=16, num_padding=0, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = torch.bfloat16
    x = 16 // torch.tensor([], dtype=dtype).element_size()  # 16 bytes of elements, as vLLM allocates the key cache
    key = torch.randn(num_tokens, num_kv_heads, head_size, generator=g, device=device).to(dtype)
    value = torch.randn(num_tokens, num_kv_heads, head_size, generator=g, device=device).to(dtype)
    # The caches hold earlier tokens: anything written to a wrong slot shows.
    key_cache = torch.randn(num_blocks, num_kv_heads, head_size // x, block_size, x, generator=g, device=device).to(dtype)
    value_cache = torch.randn(num_blocks, num_kv_heads, head_size, block_size, generator=g, device=device).to(dtype)
    # Distinct slots, as the scheduler hands them out; the batch's tail is CUDA-graph padding (-1).
    slot_mapping = torch.randperm(num_blocks * block_size, generator=g, device=device)[:num_tokens].to(torch.long)
    if num_padding:
        slot_mapping[num_tokens - num_padding:] = -1
    return {"key": key, "value": value, "key_cache": key_cache, "value_cache": value_cache, "slot_mapping": slot_mapping}
