"""The embedding engine: requests' texts merged into batches, each tokenised once and embedded.

``EmbeddingEngine`` owns everything about how the service runs the model: the dynamic batcher
(``sbert.serve.merging``), whether merged batches run packed, how many run side by side and how
torch's threads are divided among them. Routes only ``await engine.embed(texts)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from sbert.protocols import TextEncoder
from sbert.serve.merging import DynamicBatcher
from sbert.serve.settings import EngineSettings

if TYPE_CHECKING:
    from sbert.pipeline import Tokenized


@runtime_checkable
class ServedEncoder(TextEncoder, Protocol):
    """What the service needs from a model: tokenise a merged batch once, embed those tokens, and how
    it runs (``Encoder`` satisfies it)."""

    similarity_fn_name: str

    @property
    def max_seq_length(self) -> int: ...

    @property
    def backend_name(self) -> str:
        """ "torch" or "onnx"."""
        ...

    @property
    def can_pack(self) -> bool:
        """Whether ``encode_tokenized(..., packing=True)`` runs on this model and backend."""
        ...

    @property
    def runtime(self) -> str:
        """Backend and precision as an index records them ("torch/fp32")."""
        ...

    def tokenize(self, texts: Sequence[str]) -> Tokenized: ...

    def encode_tokenized(
        self,
        tokens: Tokenized,
        *,
        batch_size: int = 32,
        max_tokens: int | None = None,
        packing: bool = False,
        show_progress: bool | None = None,
    ) -> np.ndarray:
        """(len(tokens), dim) float32 sentence vectors, in input order."""
        ...


@dataclass(frozen=True)
class Embedded:
    """One request's share of a merged batch: vectors, token counts (special tokens included) and
    which texts were longer than the model's ``max_seq_length`` (and were cut)."""

    vectors: np.ndarray
    tokens: np.ndarray
    truncated: np.ndarray

    @property
    def first_truncated(self) -> int | None:
        """The position of the first text that was cut, or None."""
        hits = np.flatnonzero(self.truncated)
        return int(hits[0]) if hits.size else None


class EmbeddingEngine:
    """Embeds texts for concurrent requests in shared batches, on worker threads (never the event loop).

    ``close`` finishes the queued work, stops the workers and gives torch back its threads.
    """

    def __init__(self, encoder: ServedEncoder, settings: EngineSettings | None = None) -> None:
        settings = settings or EngineSettings()
        on_torch, can_pack = encoder.backend_name == "torch", encoder.can_pack
        if settings.packing and not can_pack:
            raise ValueError("packing needs the torch backend and a BERT-family model")
        self.encoder, self.settings = encoder, settings
        self.packing = can_pack if settings.packing is None else settings.packing
        self.workers = settings.workers_for(on_torch)
        self._threads_before = _divide_threads(self.workers) if on_torch and self.workers > 1 else None
        self.batcher = DynamicBatcher(
            self._run_batch,
            max_batch_texts=settings.max_batch_texts,
            max_wait_ms=settings.max_wait_ms,
            workers=self.workers,
        )

    async def embed(self, texts: list[str]) -> Embedded:
        """``texts``' vectors, token counts and truncation, computed in a batch shared with other requests."""
        return Embedded(*await self.batcher.embed(texts))

    def close(self, timeout: float = 30.0) -> None:
        """Finish every queued request, stop the workers, restore torch's thread count."""
        self.batcher.close(timeout)
        if self._threads_before is not None:
            import torch

            torch.set_num_threads(self._threads_before)
            self._threads_before = None

    def _run_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One merged batch, on a worker thread, tokenised once: (vectors, token counts, truncated flags)."""
        tokens = self.encoder.tokenize(texts)
        vectors = self.encoder.encode_tokenized(
            tokens,
            batch_size=self.settings.max_batch_texts if self.packing else self.settings.encode_batch_size,
            max_tokens=self.settings.max_tokens,
            packing=self.packing,
            show_progress=False,
        )
        truncated = np.zeros(len(texts), dtype=bool)
        truncated[tokens.truncated] = True
        return vectors, np.array(tokens.lengths), truncated


def _divide_threads(workers: int) -> int:
    """Give each of ``workers`` batch workers its share of torch's threads (a process-wide setting);
    returns the thread count before, to restore at shutdown."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, before // workers))
    return before
