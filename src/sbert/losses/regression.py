"""Regression objective (SBERT §3): mean squared error between cos(u, v) and the gold score."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import ScoredPair
from sbert.protocols import TrainableEncoder


class CosineRegressionLoss(nn.Module):
    """MSE(cos(u, v), (score - low) / (high - low)); STSb scores are 0-5, SICK's 1-5."""

    def __init__(self, score_range: tuple[float, float] = (0.0, 5.0)) -> None:
        super().__init__()
        low, high = score_range
        if not high > low:
            raise ValueError(f"score_range must be (low, high) with high > low, got {score_range}")
        self.low, self.high = float(low), float(high)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[ScoredPair]) -> torch.Tensor:
        u, v = encoder.embed_with_grad([p.sentence1 for p in batch], [p.sentence2 for p in batch])
        gold = torch.tensor([(p.score - self.low) / (self.high - self.low) for p in batch], device=u.device)
        return F.mse_loss(F.cosine_similarity(u, v), gold.to(u.dtype))
