import torch


class Model(torch.nn.Module):
    """vLLM reshape_and_cache (its torch reference in tests/kernels/test_cache.py, vectorized): the new tokens' K/V go into the
    paged caches in vLLM's layout, key_cache [num_blocks, num_kv_heads, head_size // x, block_size, x] and value_cache
    [num_blocks, num_kv_heads, head_size, block_size], in place; a slot of -1 is a padding token and is skipped."""

    def forward(self, key, value, key_cache, value_cache, slot_mapping):
        # key/value [num_tokens, num_kv_heads, head_size]
        num_tokens, num_kv_heads, head_size = key.shape
        block_size = value_cache.shape[3]
        x = key_cache.shape[4]
        valid = slot_mapping >= 0
        slots = slot_mapping[valid]
        block_indices = torch.div(slots, block_size, rounding_mode="floor")
        block_offsets = slots % block_size
        key_cache[block_indices, :, :, block_offsets, :] = key[valid].view(-1, num_kv_heads, head_size // x, x)
        value_cache[block_indices, :, :, block_offsets] = value[valid]
        return {"key_cache": key_cache, "value_cache": value_cache}
