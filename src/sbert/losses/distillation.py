"""Distillation from a teacher: the student learns the teacher's margins, its ranking, or its vectors.

- ``MarginMSELoss`` (Hofstätter et al. 2020): for each (query, positive, negative_k), the student's
  margin s(q, p) - s(q, n_k) against the teacher's, mean squared error over all margins of the batch.
- ``DistillKLDivLoss``: the teacher's softmax over each row's candidates (positive, negatives) at a
  temperature, and the student's; KL(teacher || student) averaged over rows, times temperature^2.
- ``EmbeddingMSELoss``: the student's vector of each text against the teacher's (same width), mean
  squared error (sentence-transformers' MSELoss, Reimers & Gurevych 2020).

The teacher's scores come with the rows (``DistillationExample``: a ``distill`` file) or from a
``Teacher`` (``sbert train --teacher MODEL``: a bi-encoder or a cross-encoder) that scores each row's
candidates when the batch is drawn (``RetrievalExample`` or ``Triplet`` rows). The student's score is
the dot product (sentence-transformers' default) or the cosine of its vectors (``similarity``). Rows
may carry different numbers of negatives.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import DistillationExample, RetrievalExample, Text, Triplet
from sbert.losses.teachers import Teacher
from sbert.protocols import TrainableEncoder

SIMILARITIES = ("dot", "cosine")
DistillRow = DistillationExample | RetrievalExample | Triplet


def _row(example: DistillRow) -> tuple[str, tuple[str, ...], tuple[float, ...] | None]:
    """(query, candidates: positive first, the teacher's scores of them or None)."""
    if isinstance(example, DistillationExample):
        return example.query, (example.positive, *example.negatives), example.scores
    if isinstance(example, RetrievalExample):
        return example.query, (example.positive, *example.negatives), None
    if isinstance(example, Triplet):
        return example.anchor, (example.positive, example.negative), None
    raise TypeError(f"distillation needs (query, positive, negatives) rows, got {type(example).__name__}")


class _CandidateLoss(nn.Module):
    """What both candidate losses share: the student's and the teacher's scores of each row's candidates,
    as (rows, most candidates) tensors, padded where a row has fewer (``mask`` False there)."""

    def __init__(self, teacher: Teacher | None = None, similarity: str = "dot") -> None:
        super().__init__()
        if similarity not in SIMILARITIES:
            raise ValueError(f"similarity {similarity!r}: expected one of {', '.join(SIMILARITIES)}")
        self.similarity = similarity
        self._teacher = (teacher,)  # a tuple: not a submodule, so neither trained nor checkpointed

    @property
    def teacher(self) -> Teacher | None:
        return self._teacher[0]

    def score_rows(self, encoder: TrainableEncoder, batch: Sequence[DistillRow]):
        """(student scores with gradients, teacher scores, mask), each (rows, most candidates)."""
        if not batch:
            raise ValueError(f"{type(self).__name__} needs a non-empty batch")
        rows = [_row(e) for e in batch]
        widths = [len(c) for _, c, _ in rows]
        queries = [q for q, _, _ in rows]
        candidates = [t for _, c, _ in rows for t in c]
        q, c = encoder.embed_with_grad(queries, candidates, roles=("query", "document"))
        if self.similarity == "cosine":
            q, c = F.normalize(q, dim=-1), F.normalize(c, dim=-1)
        owner = torch.repeat_interleave(torch.arange(len(rows), device=c.device), torch.tensor(widths, device=c.device))
        flat = (q[owner] * c).sum(-1)
        teacher = self._teacher_scores(rows, owner, candidates, flat.device)
        mask = (
            torch.arange(max(widths), device=flat.device)[None, :] < torch.tensor(widths, device=flat.device)[:, None]
        )
        student = flat.new_zeros(mask.shape).masked_scatter(mask, flat)
        teacher = torch.zeros(mask.shape, device=flat.device).masked_scatter(mask, teacher.float())
        return student, teacher, mask

    def _teacher_scores(self, rows, owner, candidates, device) -> torch.Tensor:
        given = [s for _, _, s in rows]
        if all(s is not None for s in given):
            return torch.tensor([v for s in given for v in s], dtype=torch.float32, device=device)
        if self.teacher is None:
            row = next(i for i, s in enumerate(given) if s is None)
            raise ValueError(
                f"row {row} of the batch (query {rows[row][0][:60]!r}) has no teacher scores: give a teacher "
                "(sbert train --teacher MODEL) or rows with scores (the distill format)"
            )
        queries = [rows[i][0] for i in owner.tolist()]
        with torch.no_grad():
            return self.teacher.scores(queries, candidates, device)


class MarginMSELoss(_CandidateLoss):
    """Mean squared error between the student's and the teacher's margins s(q, p) - s(q, n_k)."""

    def forward(self, encoder: TrainableEncoder, batch: Sequence[DistillRow]) -> torch.Tensor:
        student, teacher, mask = self.score_rows(encoder, batch)
        if mask.shape[1] < 2:
            raise ValueError("MarginMSE needs at least one negative per row (a margin is positive - negative)")
        margins = mask[:, 1:]
        student_margin = student[:, :1] - student[:, 1:]
        teacher_margin = (teacher[:, :1] - teacher[:, 1:]).detach()
        return F.mse_loss(student_margin[margins], teacher_margin[margins].to(student.dtype))


class DistillKLDivLoss(_CandidateLoss):
    """KL divergence of the student's softmax over each row's candidates from the teacher's (listwise)."""

    def __init__(self, teacher: Teacher | None = None, similarity: str = "dot", temperature: float = 1.0) -> None:
        super().__init__(teacher, similarity)
        if not 0 < temperature < float("inf"):
            raise ValueError(f"temperature must be a positive finite number, got {temperature}")
        self.temperature = float(temperature)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[DistillRow]) -> torch.Tensor:
        student, teacher, mask = self.score_rows(encoder, batch)
        if not bool((mask.sum(1) >= 2).all()):
            raise ValueError("KL distillation needs at least one negative per row (a softmax over one candidate)")
        minus_inf = torch.finfo(student.dtype).min
        log_p = torch.log_softmax((student / self.temperature).masked_fill(~mask, minus_inf), dim=1)
        target = torch.softmax((teacher.detach() / self.temperature).masked_fill(~mask, float("-inf")), dim=1)
        pointwise = torch.where(mask, target * (torch.log(target.clamp_min(1e-45)) - log_p), 0.0)
        return pointwise.sum() / len(batch) * self.temperature**2


class EmbeddingMSELoss(nn.Module):
    """Mean squared error between the student's vector of each text and the teacher's."""

    def __init__(self, teacher: Teacher) -> None:
        super().__init__()
        if teacher is None:
            raise ValueError("embedding distillation needs a teacher (sbert train --teacher MODEL)")
        self._teacher = (teacher,)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[Text]) -> torch.Tensor:
        texts = [_text_of(e) for e in batch]
        (student,) = encoder.embed_with_grad(texts)
        target = self._teacher[0].vectors(texts, student.device)
        if target.shape != student.shape:
            raise ValueError(
                f"the teacher's vectors are {target.shape[1]} wide and the student's {student.shape[1]}: "
                "embedding distillation needs the same width"
            )
        return F.mse_loss(student, target.to(student.dtype))


def _text_of(example: object) -> str:
    if isinstance(example, Text):
        return example.text
    if isinstance(example, str):
        return example
    raise TypeError(f"embedding distillation needs texts, got {type(example).__name__}")
