"""What each part of sbert needs from a model, and nothing more.

Evaluators, mining and clustering need a ``TextEncoder``; searching an index a ``SearchEncoder`` (query
vectors as the index's rows were made); building one, and retrieval evaluation, an ``IndexEncoder``;
losses and the trainer a ``TrainableEncoder``; re-ranking and the cross-encoder evaluators a
``PairScorer``. ``Encoder`` and ``CrossEncoder`` satisfy them, the torch-free query encoder of an
ONNX-built index (``sbert.backends.onnx_query``) satisfies ``SearchEncoder``; so does any object with the
same methods (a remote model, a stub in a test), which is the point: the callers do not reach into a
model's modules.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

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


Task = Literal["query", "document"]  # the role a text plays in a search (``sbert.prompts.Task``)
OnTruncation = Literal["warn", "error", "ignore"]  # what to do with a text cut at the model's limit


@runtime_checkable
class SearchEncoder(Protocol):
    """Queries in, one vector each out, as the index searched was embedded: what ``search_texts`` uses."""

    @property
    def runtime(self) -> str:
        """Backend and precision as an index records them: "torch/fp32", "onnx/int8", ..."""
        ...

    def resolve_prompt(
        self, prompt_name: str | None = None, prompt: str | None = None, task: Task | None = None
    ) -> str | None:
        """The text put before each input for ``task`` (or the one named, or ``prompt`` itself); None: none."""
        ...

    def encode_query(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        prompt_name: str | None = None,
        prompt: str | None = None,
        on_truncation: OnTruncation = "warn",
        show_progress: bool | None = None,
    ) -> np.ndarray:
        """(len(texts), dim) float32 query vectors (the model's query prompt unless one is given), in input order."""
        ...


@runtime_checkable
class IndexEncoder(SearchEncoder, TextEncoder, Protocol):
    """A ``SearchEncoder`` that embeds the documents too: what building an index (``build_index``,
    ``add_texts``), ``sbert index build --auto`` and retrieval evaluation use."""

    @property
    def model_dim(self) -> int:
        """Width of the vectors the model computes, before ``truncate_dim``."""
        ...

    @property
    def max_seq_length(self) -> int:
        """Tokens of a text (its prompt included) the model reads; the rest is cut."""
        ...

    truncate_dim: int | None  # keep the first that many coordinates of each vector (None: all)

    def encode_document(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        prompt_name: str | None = None,
        prompt: str | None = None,
        on_truncation: OnTruncation = "warn",
        show_progress: bool | None = None,
    ) -> np.ndarray:
        """(len(texts), dim) float32 document vectors (the model's document prompt unless one is given)."""
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
