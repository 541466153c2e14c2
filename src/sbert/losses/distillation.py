"""Distillation from a teacher: the student learns the teacher's margins, its ranking, or its vectors.

- ``MarginMSELoss`` (Hofstätter et al. 2020): for each (query, positive, negative_k), the student's
  margin s(q, p) - s(q, n_k) against the teacher's, mean squared error over all margins of the batch.
- ``DistillKLDivLoss``: the teacher's softmax over each row's candidates (positive, negatives) at a
  temperature, and the student's; KL(teacher || student) averaged over rows, times temperature^2.
- ``EmbeddingMSELoss``: the student's vector of each text against the teacher's, mean squared error
  (sentence-transformers' MSELoss, Reimers & Gurevych 2020); a narrower student (a static model) against
  the teacher's vectors projected to its width by a PCA fitted once on the training texts (tokenlearn's
  way), by cosine.

The teacher's scores come with the rows (``DistillationExample``: a ``distill`` file) or from a
``Teacher`` (``sbert train --teacher MODEL``: a bi-encoder or a cross-encoder) that scores each row's
candidates when the batch is drawn (``RetrievalExample`` or ``Triplet`` rows). The student's score is
the dot product (sentence-transformers' default) or the cosine of its vectors (``similarity``). Rows
may carry different numbers of negatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import DistillationExample, RetrievalExample, Text, Triplet
from sbert.losses.teachers import Teacher
from sbert.protocols import TrainableEncoder

if TYPE_CHECKING:
    from sbert.static.distill import Projection

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
    """The student's vector of each text against the teacher's: mean squared error, or ``1 - cosine``.

    ``prepare(texts, model)`` (the trainer calls it before the first step) embeds every training text with
    the teacher once; where the teacher is wider than the student (a static model distilled to 256
    dimensions, a 384-wide teacher), a PCA of those vectors, fitted once on them, projects them to the
    student's width (tokenlearn's way), turned by an orthogonal map towards the student's own vectors.
    Unprepared, the teacher embeds each batch as it is drawn (same width only).
    ``target_loss="auto"``: MSE for the teacher's own vectors, cosine for projected ones (the student is unit
    length, the centred projections are not)."""

    TARGET_LOSSES = ("auto", "mse", "cosine")

    def __init__(self, teacher: Teacher, target_loss: str = "auto") -> None:
        super().__init__()
        if teacher is None:
            raise ValueError("embedding distillation needs a teacher (sbert train --teacher MODEL)")
        if target_loss not in self.TARGET_LOSSES:
            raise ValueError(f"target_loss {target_loss!r}: expected one of {', '.join(self.TARGET_LOSSES)}")
        self._teacher = (teacher,)
        self.target_loss = target_loss
        self.projection: Projection | None = None  # once prepared for a narrower student
        self._rows: dict[str, int] = {}
        self._targets: torch.Tensor | None = None

    def prepare(self, examples: Sequence[Text | str], student: Any, device: torch.device | str = "cpu") -> None:
        """The teacher's vectors of every distinct text of ``examples``, once; where the teacher is wider than
        ``student`` (a model, or its width), projected to the student's width by a PCA fitted on them and
        turned (an orthogonal map: the targets' geometry is unchanged) to lie nearest the student's own
        current vectors, so that training starts from where the student is. Then each batch's targets are
        looked up, not computed."""
        from sbert.static.distill import Projection, fit_pca

        texts = list(dict.fromkeys(_text_of(e) for e in examples))
        vectors = self._teacher[0].vectors(texts, torch.device(device)).cpu().numpy()
        dim = student if isinstance(student, int) or student is None else student.model_dim
        dim = vectors.shape[1] if dim is None else dim
        if vectors.shape[1] < dim:
            raise ValueError(
                f"the teacher's vectors are {vectors.shape[1]} wide, narrower than the student's {dim}: "
                "distil the student at the teacher's width or narrower"
            )
        if vectors.shape[1] > dim:
            projection = fit_pca(vectors, dim)
            if hasattr(student, "encode"):
                own = student.encode(texts, batch_size=256, on_truncation="ignore", show_progress=False)
                turn = nearest_rotation(projection.apply(vectors), np.asarray(own, dtype=np.float32))
                projection = Projection(projection.mean, projection.components @ turn)
            self.projection = projection
            vectors = projection.apply(vectors)
        self._rows = {t: i for i, t in enumerate(texts)}
        self._targets = torch.from_numpy(vectors).to(device)

    def targets(self, texts: Sequence[str], device: torch.device) -> torch.Tensor:
        """(len(texts), width): the prepared targets of ``texts``, or the teacher's vectors of them."""
        if self._targets is None:
            return self._teacher[0].vectors(texts, device)
        try:
            rows = torch.tensor([self._rows[t] for t in texts], device=self._targets.device)
        except KeyError as err:
            raise ValueError(f"text {str(err)[:80]} was not among the texts the loss was prepared with") from None
        return self._targets[rows].to(device)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[Text]) -> torch.Tensor:
        texts = [_text_of(e) for e in batch]
        (student,) = encoder.embed_with_grad(texts)
        target = self.targets(texts, student.device).to(student.dtype)
        if target.shape != student.shape:
            raise ValueError(
                f"the teacher's vectors are {target.shape[1]} wide and the student's {student.shape[1]}: "
                "embedding distillation needs the same width (sbert train projects them by PCA to the "
                "student's width; in Python, call the loss's prepare(texts, model) first)"
            )
        cosine = self.target_loss == "cosine" or (self.target_loss == "auto" and self.projection is not None)
        if cosine:
            return (1 - F.cosine_similarity(student, target, dim=-1)).mean()
        return F.mse_loss(student, target)


def nearest_rotation(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The orthogonal (dim, dim) matrix R minimising ||source @ R - target|| (orthogonal Procrustes: from the
    SVD of source^T target), rows compared at unit length."""
    a = source / np.maximum(np.linalg.norm(source, axis=1, keepdims=True), 1e-12)
    b = target / np.maximum(np.linalg.norm(target, axis=1, keepdims=True), 1e-12)
    u, _, vt = np.linalg.svd(a.astype(np.float64).T @ b.astype(np.float64))
    return u @ vt


def _text_of(example: object) -> str:
    if isinstance(example, Text):
        return example.text
    if isinstance(example, str):
        return example
    raise TypeError(f"embedding distillation needs texts, got {type(example).__name__}")
