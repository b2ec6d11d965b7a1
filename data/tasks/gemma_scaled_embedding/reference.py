import torch
from torch import nn


class Model(nn.Module):
    """Gemma's input embedding (HF modeling_gemma.py): nn.Embedding lookup of the token ids, then times
    sqrt(hidden_size) rounded to the embedding's dtype, in bf16."""

    def __init__(self, vocab_size, hidden_size, pad_token_id=0, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size, pad_token_id).to(torch.bfloat16)
        self.register_buffer("normalizer", torch.tensor(hidden_size**0.5), persistent=False)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        normalizer = self.normalizer.to(hidden_states.dtype)
        return hidden_states * normalizer
