"""Matryoshka representation learning (Kusupati et al. 2022): one loss at several widths at once.

``MatryoshkaLoss(loss, dims)`` computes ``loss`` on the first ``d`` coordinates of every sentence vector
(made unit length again), for each ``d`` in ``dims``, and sums them (times ``weights``, default 1). The
vectors are computed once per step: the wrapped loss sees an encoder whose ``embed_with_grad`` gives the
same forward pass's vectors, cut to ``d``. Equal to sentence-transformers' ``MatryoshkaLoss`` (loss and
gradients). A model so trained keeps its quality when cut to those widths at inference (``truncate_dim``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from sbert.protocols import TrainableEncoder


def parse_dims(text: str | Sequence[int]) -> tuple[int, ...]:
    """``"384,256,128"`` (or a list of integers) as positive widths, largest first; ValueError otherwise."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    try:
        dims = [int(str(p).strip()) for p in parts if str(p).strip()]
    except ValueError:
        raise ValueError(
            f"matryoshka dims {text!r}: expected comma-separated integers such as 384,256,128,64"
        ) from None
    if not dims or any(d < 1 for d in dims) or len(set(dims)) != len(dims):
        raise ValueError(f"matryoshka dims {text!r}: expected distinct positive integers such as 384,256,128,64")
    return tuple(sorted(dims, reverse=True))


class _Cut:
    """An encoder whose ``embed_with_grad`` replays recorded vectors (or records them), cut to ``dim``."""

    def __init__(self, encoder: TrainableEncoder, recorded: list, dim: int, record: bool) -> None:
        self._encoder, self._recorded, self._dim, self._record = encoder, recorded, dim, record
        self._calls = 0

    def embed_with_grad(self, *groups: Sequence[str], roles: Any = None) -> tuple[torch.Tensor, ...]:
        if self._record:
            self._recorded.append(self._encoder.embed_with_grad(*groups, roles=roles))
        vectors = self._recorded[self._calls]
        self._calls += 1
        return tuple(F.normalize(v[..., : self._dim], p=2, dim=-1) for v in vectors)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)


class MatryoshkaLoss(nn.Module):
    """``sum_d weight_d * loss(encoder cut to d, batch)`` over ``dims`` (largest first)."""

    def __init__(self, loss: nn.Module, dims: Sequence[int], weights: Sequence[float] | None = None) -> None:
        super().__init__()
        if getattr(loss, "uses_cache", False) or type(loss).__name__.startswith("Cached"):
            raise ValueError("matryoshka wraps losses that embed in one pass; use mnrl instead of cached-mnrl")
        self.loss = loss
        pairs = sorted(zip(dims, weights or [1.0] * len(dims), strict=True), key=lambda p: -p[0])
        self.dims = tuple(int(d) for d, _ in pairs)
        self.weights = tuple(float(w) for _, w in pairs)
        self.global_batch = getattr(loss, "global_batch", False)

    def forward(self, encoder: TrainableEncoder, batch: Sequence) -> torch.Tensor:
        width = getattr(encoder, "model_dim", None)
        if width is not None and self.dims[0] > width:
            raise ValueError(f"matryoshka dim {self.dims[0]} exceeds the model's {width} dimensions")
        recorded: list = []
        parts = [
            weight * self.loss(_Cut(encoder, recorded, dim, record=k == 0), batch)
            for k, (dim, weight) in enumerate(zip(self.dims, self.weights, strict=True))
        ]
        total = parts[0]  # the widest first; parse_dims gives at least one
        for part in parts[1:]:
            total = total + part
        return total
