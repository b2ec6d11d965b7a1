import torch
from torch import nn


class TemperatureLogitsWarper:
    def __init__(self, temperature: float):
        if not isinstance(temperature, float) or not (temperature > 0):
            raise ValueError(f"`temperature` (={temperature}) has to be a strictly positive float.")
        self.temperature = temperature

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores_processed = scores / self.temperature
        return scores_processed


class Model(nn.Module):
    """HF generate() sampling step: TemperatureLogitsWarper (scores / temperature) then softmax over the vocabulary."""

    def __init__(self, temperature=0.7):
        super().__init__()
        self.warper = TemperatureLogitsWarper(temperature)

    def forward(self, input_ids, scores):
        next_token_scores = self.warper(input_ids, scores)
        probs = nn.functional.softmax(next_token_scores, dim=-1)
        return probs
