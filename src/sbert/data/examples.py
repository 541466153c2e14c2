"""The kinds of training and evaluation example, as plain frozen records."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScoredPair:
    """Two sentences and a gold similarity score on the data set's own scale (STSb 0-5, SICK 1-5)."""

    sentence1: str
    sentence2: str
    score: float


@dataclass(frozen=True)
class LabeledPair:
    """Two sentences and a class index (NLI: see ``sbert.data.nli.LABELS``)."""

    sentence1: str
    sentence2: str
    label: int


@dataclass(frozen=True)
class Triplet:
    """An anchor, a positive closer to it, and a negative farther from it."""

    anchor: str
    positive: str
    negative: str


@dataclass(frozen=True)
class RetrievalExample:
    """A query, a relevant (positive) text, and 0..n hard negatives: texts that look relevant but are not.

    In-batch-negatives objectives score the query against every positive and every negative of the
    batch; the rows of a batch may carry different numbers of negatives.
    """

    query: str
    positive: str
    negatives: tuple[str, ...] = ()


@dataclass(frozen=True)
class Text:
    """One unlabelled text: what label-free objectives (SimCSE, TSDAE, embedding distillation) read."""

    text: str


@dataclass(frozen=True)
class DistillationExample:
    """A query, its positive and 0..n negatives, and a teacher's scores of (positive, *negatives).

    Only differences of ``scores`` matter (the margins and the teacher's softmax do not change when a
    constant is added), so a row that gives just the margin ``m`` = teacher(q, p) - teacher(q, n) holds
    ``scores=(m, 0.0)``.
    """

    query: str
    positive: str
    negatives: tuple[str, ...]
    scores: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.scores) != 1 + len(self.negatives):
            raise ValueError(
                f"{len(self.scores)} teacher scores for {1 + len(self.negatives)} candidates "
                "(the positive and each negative)"
            )
