"""In-batch negatives for batches larger than memory allows: gradient caching (GradCache, Gao et al. 2021).

The loss of ``MultipleNegativesRankingLoss`` couples every row of a batch with every other, so a batch
cannot be cut into independent pieces. Gradient caching gets the same gradients with the memory of one
mini-batch of ``mini_batch_size`` texts:

1. embed every column (anchors, positives, negatives) a mini-batch at a time without a graph, keeping
   each mini-batch's random-number state (dropout);
2. compute the loss from those embeddings, ``mini_batch_size`` anchor rows at a time, and back-propagate
   each piece down to the embeddings only: their gradients are the cache;
3. when the trainer calls ``backward`` on the returned loss, embed each mini-batch again with a graph,
   under the random-number state (and autocast) of step 1, so dropout draws the same masks, and
   back-propagate the cached gradients of its embeddings into the model.

Step 3 runs from a hook on the returned (leaf) loss tensor, so the trainer treats this loss as any
other: ``loss.backward()`` (scaled for fp16 or not) fills the model's gradients.

Under ``torchrun`` each rank embeds its share of the texts in step 1 and gathers the other ranks' vectors;
step 2 runs on the whole batch on every rank, and step 3 replays the rank's own mini-batches only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sbert import distributed
from sbert.losses.in_batch import (
    Guide,
    InBatchExample,
    column_roles,
    gather_columns,
    masked,
    ranking_logits,
    share_of_columns,
    text_columns,
)
from sbert.protocols import TrainableEncoder


@dataclass
class _RngState:
    """The CPU random-number state, and the CUDA one of ``device`` when it is a CUDA device."""

    device: torch.device
    cpu: torch.Tensor
    cuda: torch.Tensor | None

    @classmethod
    def capture(cls, device: torch.device) -> _RngState:
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(device, torch.get_rng_state(), cuda)

    @contextlib.contextmanager
    def replayed(self) -> Iterator[None]:
        """Run under this state; the state outside is left as it was."""
        devices = [self.device] if self.cuda is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


@dataclass
class _Autocast:
    """The autocast setting of the forward pass, re-entered for the replay (which runs during backward)."""

    device_type: str
    enabled: bool
    dtype: torch.dtype | None

    @classmethod
    def current(cls, device: torch.device) -> _Autocast:
        kind = device.type
        enabled = torch.is_autocast_enabled(kind)
        return cls(kind, enabled, torch.get_autocast_dtype(kind) if enabled else None)

    def context(self) -> contextlib.AbstractContextManager:
        if not self.enabled:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)


@dataclass
class _MiniBatch:
    """Texts of one column embedded together, their random-number state, and their embeddings' gradient."""

    texts: list[str]
    role: str  # "query" (anchors) or "document": which prompt the model puts before them
    rng: _RngState
    embeddings: torch.Tensor  # (len(texts), dim), without a graph
    grad: torch.Tensor | None = None  # (len(texts), dim): d loss / d embeddings, from step 2


class CachedMultipleNegativesRankingLoss(nn.Module):
    """``MultipleNegativesRankingLoss`` with gradient caching: the same loss and gradients (up to float
    rounding), with the memory of ``mini_batch_size`` texts instead of the whole batch's."""

    global_batch = True  # the trainer gives every rank the whole batch (see sbert.losses.in_batch)
    in_batch_negatives = True  # the trainer keeps a text out of batches already holding it (training.sampling)

    def __init__(self, scale: float = 20.0, mini_batch_size: int = 32, guide: Guide | None = None) -> None:
        super().__init__()
        if mini_batch_size < 1:
            raise ValueError(f"mini_batch_size must be at least 1, got {mini_batch_size}")
        self.scale, self.mini_batch_size = float(scale), int(mini_batch_size)
        self._guide = (guide,)  # not a submodule: neither trained nor checkpointed (see sbert.losses.in_batch)

    def forward(self, encoder: TrainableEncoder, batch: Sequence[InBatchExample]) -> torch.Tensor:
        training = torch.is_grad_enabled()
        autocast = _Autocast.current(encoder.device)
        columns = text_columns(batch)  # under torchrun: this rank embeds its share, gathers the rest
        mine = share_of_columns(columns)
        pieces = [
            piece
            for texts, role in zip(mine, column_roles(len(mine)), strict=True)
            for piece in self._embed_without_graph(encoder, texts, role)
        ]
        local = torch.cat([p.embeddings for p in pieces]) if pieces else torch.zeros(0, 0, device=encoder.device)
        vectors = torch.cat(gather_columns(local, columns)).requires_grad_(training)
        dropped = self._guide[0].mask(columns, vectors.device) if self._guide[0] else None
        loss = self._loss_and_cache(vectors, len(batch), backward=training, dropped=dropped)
        if not training:
            return loss
        assert vectors.grad is not None  # the loss's backward above filled it
        cache = vectors.grad[distributed.share(len(vectors))]  # the cache: gradients of this rank's vectors
        for piece, grad in zip(pieces, cache.split([len(p.texts) for p in pieces]), strict=True):
            piece.grad = grad
        loss = loss.detach().requires_grad_()
        loss.register_hook(lambda grad: self._replay(encoder, pieces, autocast, grad))
        return loss

    def _embed_without_graph(self, encoder: TrainableEncoder, texts: list[str], role: str) -> list[_MiniBatch]:
        """Step 1: one column (or this rank's part of it), ``mini_batch_size`` texts at a time, without a graph."""
        pieces = []
        for start in range(0, len(texts), self.mini_batch_size):
            chunk = texts[start : start + self.mini_batch_size]
            rng = _RngState.capture(encoder.device)
            with torch.no_grad():
                (vectors,) = encoder.embed_with_grad(chunk, roles=role)
            pieces.append(_MiniBatch(chunk, role, rng, vectors.detach()))
        return pieces

    def _loss_and_cache(
        self, vectors: torch.Tensor, rows: int, backward: bool, dropped: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Step 2: the mean cross-entropy over ``rows`` anchors (the first ``rows`` of ``vectors``, every
        column's vectors in order; the rest are candidates), ``mini_batch_size`` anchors at a time; with
        ``backward``, each piece is back-propagated to ``vectors`` at once (its graph freed). ``dropped``:
        the guide's mask (anchors, candidates)."""
        anchors, candidates = vectors[:rows], vectors[rows:]
        total = torch.zeros((), device=vectors.device)
        for start in range(0, rows, self.mini_batch_size):
            stop = min(start + self.mini_batch_size, rows)
            scores = ranking_logits(anchors[start:stop], candidates, self.scale)
            scores = masked(scores, None if dropped is None else dropped[start:stop])
            targets = torch.arange(start, stop, device=scores.device)
            piece = F.cross_entropy(scores, targets, reduction="sum") / rows
            if backward:
                piece.backward()
                piece = piece.detach()
            total = total + piece
        return total

    def _replay(self, encoder: TrainableEncoder, pieces: list[_MiniBatch], autocast: _Autocast, grad) -> None:
        """Step 3: each mini-batch embedded again with a graph, under its step-1 random-number state and
        autocast, and its cached embedding gradient (times the loss's own gradient) back-propagated."""
        with torch.enable_grad():
            for piece in pieces:
                with piece.rng.replayed(), autocast.context():
                    (vectors,) = encoder.embed_with_grad(piece.texts, roles=piece.role)
                assert piece.grad is not None  # cached in step 2
                surrogate = torch.dot(vectors.flatten().float(), piece.grad.flatten().float()) * grad
                surrogate.backward()
