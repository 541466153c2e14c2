"""Cross-encoder objectives: a score per pair (regression) or a label per pair (classification).

Both take a ``CrossEncoder`` and a batch of examples, like the bi-encoder losses, so the same
Trainer runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import LabeledPair, ScoredPair

if TYPE_CHECKING:
    from sbert.cross_encoder import CrossEncoder


def _logits(model: CrossEncoder, batch: Sequence[ScoredPair | LabeledPair]) -> torch.Tensor:
    pairs = [(p.sentence1, p.sentence2) for p in batch]
    encoded = model.tokenize(pairs)
    return model(model._collate(encoded, list(range(len(pairs)))))


class CrossEncoderScoreLoss(nn.Module):
    """Gold scores scaled to [0, 1] against the one logit: BCE-with-logits (``"bce"``, as
    sentence-transformers trains STSb cross-encoders) or MSE of its sigmoid (``"mse"``)."""

    def __init__(self, score_range: tuple[float, float] = (0.0, 5.0), kind: str = "bce") -> None:
        super().__init__()
        low, high = score_range
        if not high > low:
            raise ValueError(f"score_range must be (low, high) with high > low, got {score_range}")
        if kind not in ("bce", "mse"):
            raise ValueError(f"kind must be 'bce' or 'mse', got {kind!r}")
        self.low, self.high, self.kind = float(low), float(high), kind

    def forward(self, model: CrossEncoder, batch: Sequence[ScoredPair]) -> torch.Tensor:
        logits = _logits(model, batch)[:, 0]
        gold = torch.tensor([(p.score - self.low) / (self.high - self.low) for p in batch], device=logits.device)
        if self.kind == "bce":
            return F.binary_cross_entropy_with_logits(logits, gold.to(logits.dtype))
        return F.mse_loss(torch.sigmoid(logits), gold.to(logits.dtype))


class CrossEncoderClassificationLoss(nn.Module):
    """Cross-entropy of the ``num_labels`` logits against the pair's label (NLI: 3 labels)."""

    def forward(self, model: CrossEncoder, batch: Sequence[LabeledPair]) -> torch.Tensor:
        logits = _logits(model, batch)
        labels = torch.tensor([p.label for p in batch], device=logits.device)
        return F.cross_entropy(logits, labels)
