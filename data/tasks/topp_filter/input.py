import torch


def _make_inputs(batch_size, prompt_len, vocab_size):
    torch.manual_seed(0)
    input_ids = torch.randint(0, vocab_size, (batch_size, prompt_len), device="cuda")
    scores = 3.0 * torch.randn(batch_size, vocab_size, device="cuda")
    return {"input_ids": input_ids, "scores": scores}
