"""Triplet objective (SBERT §3): max(d(a, p) - d(a, n) + margin, 0), averaged over the batch.

The paper uses the euclidean distance with margin 1 (sentence-transformers defaults to 5).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import Triplet
from sbert.protocols import TrainableEncoder

DISTANCES = {
    "euclidean": lambda x, y: F.pairwise_distance(x, y, p=2),
    "manhattan": lambda x, y: F.pairwise_distance(x, y, p=1),
    "cosine": lambda x, y: 1 - F.cosine_similarity(x, y),
}


class TripletLoss(nn.Module):
    def __init__(self, distance: str = "euclidean", margin: float = 1.0) -> None:
        super().__init__()
        if distance not in DISTANCES:
            raise ValueError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}")
        self.distance, self.margin = distance, float(margin)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[Triplet]) -> torch.Tensor:
        a, p, n = encoder.embed_with_grad(
            [t.anchor for t in batch],
            [t.positive for t in batch],
            [t.negative for t in batch],
            roles=("query", "document", "document"),
        )
        d = DISTANCES[self.distance]
        return F.relu(d(a, p) - d(a, n) + self.margin).mean()
