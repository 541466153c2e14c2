"""In-batch negatives (multiple-negatives ranking, Henderson et al. 2017).

For anchor i the right candidate is positive i; every other positive in the batch, and every hard
negative the examples carry (any number per row: ``RetrievalExample.negatives``, or a triplet's one),
is a wrong candidate. Cross-entropy over scale * cosine.

Candidates are laid out as sentence-transformers lays out (anchor, positive, negative_1, ...,
negative_n) columns: all positives, then every row's first negative, then every row's second, ...;
rows with fewer negatives simply add fewer candidates (a hard negative of one row is a wrong
candidate for every row anyway).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import LabeledPair, RetrievalExample, ScoredPair, Triplet
from sbert.protocols import TrainableEncoder

InBatchExample = RetrievalExample | Triplet | LabeledPair | ScoredPair


def _fields(example) -> tuple[str, str, tuple[str, ...]]:
    if isinstance(example, RetrievalExample):
        return example.query, example.positive, tuple(example.negatives)
    if isinstance(example, Triplet):
        return example.anchor, example.positive, (example.negative,)
    if isinstance(example, (LabeledPair, ScoredPair)):
        return example.sentence1, example.sentence2, ()
    raise TypeError(f"in-batch negatives need pairs, triplets or retrieval examples, got {type(example).__name__}")


def text_columns(batch: Sequence[InBatchExample]) -> list[list[str]]:
    """[anchors, positives, first negatives, second negatives, ...]: column k + 2 holds the k-th hard
    negative of each row that has one, in row order (so later columns may be shorter)."""
    if not batch:
        raise ValueError("in-batch negatives need a non-empty batch")
    anchors, positives, negatives = zip(*(_fields(e) for e in batch), strict=True)
    width = max(len(n) for n in negatives)
    columns = [[row[k] for row in negatives if len(row) > k] for k in range(width)]
    return [list(anchors), list(positives), *columns]


def ranking_logits(anchors: torch.Tensor, candidates: torch.Tensor, scale: float) -> torch.Tensor:
    """scale * cos(anchor i, candidate j): (n_anchors, d) and (n_candidates, d) -> (n_anchors, n_candidates)."""
    return F.normalize(anchors, dim=1) @ F.normalize(candidates, dim=1).T * scale


class MultipleNegativesRankingLoss(nn.Module):
    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.scale = float(scale)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[InBatchExample]) -> torch.Tensor:
        a, *candidates = encoder.embed_with_grad(*text_columns(batch))
        scores = ranking_logits(a, torch.cat(candidates), self.scale)
        return F.cross_entropy(scores, torch.arange(len(batch), device=scores.device))
