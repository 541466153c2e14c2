"""In-batch negatives (multiple-negatives ranking, Henderson et al. 2017).

For anchor i the right candidate is positive i; every other positive in the batch, and every hard
negative the examples carry (any number per row: ``RetrievalExample.negatives``, or a triplet's one),
is a wrong candidate. Cross-entropy over scale * cosine.

Candidates are laid out as sentence-transformers lays out (anchor, positive, negative_1, ...,
negative_n) columns: all positives, then every row's first negative, then every row's second, ...;
rows with fewer negatives simply add fewer candidates (a hard negative of one row is a wrong
candidate for every row anyway).

Under ``torchrun`` these losses take the whole global batch on every rank (``global_batch``): each rank
embeds its share of the texts and gathers the others' vectors, so the negatives are the global batch's.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import LabeledPair, RetrievalExample, ScoredPair, Triplet
from sbert.protocols import TrainableEncoder
from sbert.training import distributed

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


def share_of_columns(columns: Sequence[list[str]]) -> list[list[str]]:
    """This rank's part of each column: the texts of all columns, in order, cut into one contiguous share
    per rank (``distributed.share``); one process: the columns themselves."""
    part = distributed.share(sum(len(column) for column in columns))
    mine, start = [], 0
    for column in columns:
        mine.append(column[max(part.start - start, 0) : max(part.stop - start, 0)])
        start += len(column)
    return mine


def gather_columns(local: torch.Tensor, columns: Sequence[list[str]]) -> list[torch.Tensor]:
    """Each column's vectors, (len(column), d), from this rank's vectors of ``share_of_columns`` (all of
    them, in order): the other ranks' come by ``distributed.gather_rows``, without a graph."""
    total = sum(len(column) for column in columns)
    rows = distributed.gather_rows(local, distributed.share_sizes(total))
    return list(rows.split([len(column) for column in columns]))


def ranking_logits(anchors: torch.Tensor, candidates: torch.Tensor, scale: float) -> torch.Tensor:
    """scale * cos(anchor i, candidate j): (n_anchors, d) and (n_candidates, d) -> (n_anchors, n_candidates)."""
    return F.normalize(anchors, dim=1) @ F.normalize(candidates, dim=1).T * scale


class MultipleNegativesRankingLoss(nn.Module):
    global_batch = True  # the trainer gives every rank the whole batch (see the module's docstring)
    in_batch_negatives = True  # the trainer keeps a text out of batches already holding it (training.sampling)

    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.scale = float(scale)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[InBatchExample]) -> torch.Tensor:
        columns = text_columns(batch)
        mine = share_of_columns(columns)
        local = torch.cat(encoder.embed_with_grad(*mine)) if any(mine) else torch.zeros(0, 0, device=encoder.device)
        a, *candidates = gather_columns(local, columns)
        scores = ranking_logits(a, torch.cat(candidates), self.scale)
        return F.cross_entropy(scores, torch.arange(len(batch), device=scores.device))
