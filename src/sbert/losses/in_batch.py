"""In-batch negatives (multiple-negatives ranking, Henderson et al. 2017).

For anchor i the right candidate is positive i; every other positive in the batch, and every hard
negative if the examples carry one, is a wrong candidate. Cross-entropy over scale * cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import LabeledPair, ScoredPair, Triplet
from sbert.protocols import TrainableEncoder


def _fields(example) -> tuple[str, str, str | None]:
    if isinstance(example, Triplet):
        return example.anchor, example.positive, example.negative
    if isinstance(example, (LabeledPair, ScoredPair)):
        return example.sentence1, example.sentence2, None
    raise TypeError(f"in-batch negatives need pairs or triplets, got {type(example).__name__}")


class MultipleNegativesRankingLoss(nn.Module):
    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.scale = float(scale)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[Triplet | LabeledPair | ScoredPair]) -> torch.Tensor:
        anchors, positives, negatives = zip(*(_fields(e) for e in batch), strict=True)
        groups = [list(anchors), list(positives)]
        if all(n is not None for n in negatives):
            groups.append(list(negatives))
        a, *candidates = encoder.embed_with_grad(*groups)
        scores = F.normalize(a, dim=1) @ F.normalize(torch.cat(candidates), dim=1).T * self.scale
        return F.cross_entropy(scores, torch.arange(len(batch), device=scores.device))
