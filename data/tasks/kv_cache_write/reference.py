import torch


class Model(torch.nn.Module):
    """vLLM reshape_and_cache semantics in torch: scatter the new tokens' k/v into the paged cache at slot_mapping, in place."""

    def forward(self, key, value, key_cache, value_cache, slot_mapping):
        # key/value [num_tokens, num_kv_heads, head_size]; caches [num_blocks, block_size, num_kv_heads, head_size]
        block_size = key_cache.shape[1]
        block_indices = torch.div(slot_mapping, block_size, rounding_mode="floor")
        block_offsets = slot_mapping % block_size
        key_cache[block_indices, block_offsets] = key
        value_cache[block_indices, block_offsets] = value
        return key_cache, value_cache
