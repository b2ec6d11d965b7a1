import torch


class Model(torch.nn.Module):
    """Log-probabilities of the sampled tokens from fp32 logits, as RL trainers compute them for the
    policy loss (TRL's selective_log_softmax, fp32 path): the logit picked by gather minus the row's logsumexp."""

    def __init__(self):
        super().__init__()

    def forward(self, logits, token_ids):
        # logits: [num_tokens, vocab_size] fp32; token_ids: [num_tokens] int64
        selected = torch.gather(logits, dim=-1, index=token_ids.unsqueeze(-1)).squeeze(-1)
        return selected - torch.logsumexp(logits, dim=-1)
