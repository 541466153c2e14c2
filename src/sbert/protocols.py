"""What each part of sbert needs from a model, and nothing more.

Evaluators, search and the service need a ``TextEncoder``; losses and the trainer a
``TrainableEncoder``; re-ranking and the cross-encoder evaluators a ``PairScorer``. ``Encoder`` and
``CrossEncoder`` satisfy them; so does any object with the same methods (a remote model, a stub in a
test), which is the point: the callers do not reach into a model's modules.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch


@runtime_checkable
class TextEncoder(Protocol):
    """Texts in, one vector each out: what evaluation, search, mining and the service use."""

    @property
    def dim(self) -> int:
        """Width of the vectors ``encode`` returns."""
        ...

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, normalize: bool = False, show_progress: bool | None = None
    ) -> np.ndarray:
        """(len(texts), dim) float32, in input order."""
        ...


@runtime_checkable
class TrainableEncoder(TextEncoder, Protocol):
    """A ``TextEncoder`` with gradients: what the losses and the trainer use."""

    @property
    def device(self) -> torch.device: ...

    def embed_with_grad(self, *groups: Sequence[str], roles: Any = None) -> tuple[torch.Tensor, ...]:
        """Vectors with gradients for each group of texts, from one forward pass; ``roles``: "query",
        "document" or None (the default prompt), one for all groups or one per group."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...

    def train(self, mode: bool = True) -> TrainableEncoder: ...

    def save(self, path: str | Path) -> Path: ...


@runtime_checkable
class PairScorer(Protocol):
    """Scores (text, text) pairs: what re-ranking and the cross-encoder evaluators use."""

    @property
    def num_labels(self) -> int: ...

    def predict(
        self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress: bool | None = None
    ) -> np.ndarray:
        """(n,) scores for one label, (n, num_labels) otherwise, in input order."""
        ...
