"""In-batch negatives (multiple-negatives ranking, Henderson et al. 2017).

For anchor i the right candidate is positive i; every other positive in the batch, and every hard
negative the examples carry (any number per row: ``RetrievalExample.negatives``, or a triplet's one),
is a wrong candidate. Cross-entropy over scale * cosine.

Candidates are laid out as sentence-transformers lays out (anchor, positive, negative_1, ...,
negative_n) columns: all positives, then every row's first negative, then every row's second, ...;
rows with fewer negatives simply add fewer candidates (a hard negative of one row is a wrong
candidate for every row anyway).

With a ``guide`` (GISTEmbed, Solatorio 2024; sentence-transformers' ``GISTEmbedLoss`` semantics), a
frozen model scores the same anchors and candidates, and every candidate it scores above the row's own
positive (``margin_strategy`` "absolute": above guide(a, p) - margin; "relative": above guide(a, p) -
|guide(a, p)| * margin) is dropped from that row's softmax: a duplicate the labels do not know of is
not pushed away. Over ``Text`` rows (texts alone) the positive is the text itself, embedded a second
time under other dropout masks: SimCSE (Gao et al. 2021).

Under ``torchrun`` these losses take the whole global batch on every rank (``global_batch``): each rank
embeds its share of the texts and gathers the others' vectors, so the negatives are the global batch's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sbert import distributed
from sbert.data.examples import LabeledPair, RetrievalExample, ScoredPair, Text, Triplet
from sbert.losses.teachers import Teacher
from sbert.protocols import TrainableEncoder

InBatchExample = RetrievalExample | Triplet | LabeledPair | ScoredPair | Text
MARGIN_STRATEGIES = ("absolute", "relative")


def _fields(example) -> tuple[str, str, tuple[str, ...]]:
    if isinstance(example, RetrievalExample):
        return example.query, example.positive, tuple(example.negatives)
    if isinstance(example, Triplet):
        return example.anchor, example.positive, (example.negative,)
    if isinstance(example, (LabeledPair, ScoredPair)):
        return example.sentence1, example.sentence2, ()
    if isinstance(example, Text):
        return example.text, example.text, ()
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


def column_roles(columns: int) -> list[str]:
    """Which side each column is on, for the model's prompts: the anchors are queries, the rest documents."""
    return ["query"] + ["document"] * (columns - 1)


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


@dataclass
class Dropped:
    """What a guide dropped so far: rows masked, their in-batch candidates (each row's own positive not
    counted), the candidates dropped, and the rows that lost at least one."""

    rows: int = 0
    candidates: int = 0
    dropped: int = 0
    rows_dropped: int = 0

    def add(self, dropped: torch.Tensor) -> None:
        """Count one batch's mask (anchors, candidates)."""
        self.rows += dropped.shape[0]
        self.candidates += dropped.shape[0] * (dropped.shape[1] - 1)
        self.dropped += int(dropped.sum())
        self.rows_dropped += int(dropped.any(1).sum())

    def __str__(self) -> str:
        share = 100 * self.dropped / self.candidates if self.candidates else 0.0
        return (
            f"{self.dropped:,} of {self.candidates:,} in-batch candidates dropped ({share:.2f}%), "
            f"in {self.rows_dropped:,} of {self.rows:,} rows"
        )


class Guide:
    """GISTEmbed's guided masking: which in-batch candidates a frozen ``guide`` scores above the row's
    positive (``counts``: what it dropped so far)."""

    def __init__(self, guide: Teacher | str, margin_strategy: str = "absolute", margin: float = 0.0) -> None:
        if margin_strategy not in MARGIN_STRATEGIES:
            raise ValueError(f"margin_strategy {margin_strategy!r}: expected one of {', '.join(MARGIN_STRATEGIES)}")
        self.guide = guide if isinstance(guide, Teacher) else Teacher(guide)
        if self.guide.cross:
            raise ValueError("a guide must be a bi-encoder: its vectors score every anchor against every candidate")
        self.margin_strategy, self.margin = margin_strategy, float(margin)
        self.counts = Dropped()

    def mask(self, columns: Sequence[list[str]], device: torch.device) -> torch.Tensor:
        """(anchors, candidates) bool: True where the candidate is dropped (never the row's own positive)."""
        anchors, candidates = columns[0], [t for column in columns[1:] for t in column]
        with torch.no_grad():
            sims = self.guide.similarity_matrix(anchors, candidates, device)
        rows = torch.arange(len(anchors), device=device)
        positive = sims[rows, rows][:, None]
        slack = self.margin if self.margin_strategy == "absolute" else positive.abs() * self.margin
        dropped = sims > positive - slack
        dropped[rows, rows] = False
        self.counts.add(dropped)
        return dropped


def masked(scores: torch.Tensor, dropped: torch.Tensor | None) -> torch.Tensor:
    """``scores`` with the ``dropped`` candidates at -inf (out of the softmax); None: unchanged."""
    return scores if dropped is None else scores.masked_fill(dropped, float("-inf"))


class MultipleNegativesRankingLoss(nn.Module):
    global_batch = True  # the trainer gives every rank the whole batch (see the module's docstring)
    in_batch_negatives = True  # the trainer keeps a text out of batches already holding it (training.sampling)

    def __init__(self, scale: float = 20.0, guide: Guide | None = None) -> None:
        super().__init__()
        self.scale = float(scale)
        self._guide = (guide,)  # a tuple: the guide is not a submodule, so neither trained nor checkpointed

    @property
    def guide(self) -> Guide | None:
        return self._guide[0]

    def forward(self, encoder: TrainableEncoder, batch: Sequence[InBatchExample]) -> torch.Tensor:
        columns = text_columns(batch)
        mine = share_of_columns(columns)
        if any(mine):
            local = torch.cat(encoder.embed_with_grad(*mine, roles=column_roles(len(mine))))
        else:
            local = torch.zeros(0, 0, device=encoder.device)
        a, *candidates = gather_columns(local, columns)
        scores = ranking_logits(a, torch.cat(candidates), self.scale)
        dropped = self.guide.mask(columns, scores.device) if self.guide else None
        return F.cross_entropy(masked(scores, dropped), torch.arange(len(batch), device=scores.device))


def guide_from(settings, max_seq_length: int | None = None) -> Guide | None:
    """The ``Guide`` an in-batch objective's settings name (``guide``: a model path; empty: none), reading at
    most ``max_seq_length`` tokens of a text (the student's training length: it judges what the student reads)."""
    if not settings.get("guide"):
        return None
    guide = Teacher(settings["guide"], max_seq_length=max_seq_length)
    return Guide(guide, settings.get("margin_strategy", "absolute"), settings.get("guide_margin", 0.0))
