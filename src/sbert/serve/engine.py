"""The embedding engine: requests' texts merged into batches, each tokenised once and embedded.

``EmbeddingEngine`` owns everything about how the service runs the model: the dynamic batcher
(``sbert.serve.merging``), whether merged batches run packed, how many run side by side and how
torch's threads are divided among them. Routes only ``await engine.embed(texts, prompt)``.

Requests with different prompts share a batch: each text carries its request's prompt through the
batcher, and each run of texts with one prompt is tokenised once, with that prompt before it.

LoRA adapters over the engine's base (``adapters``: name -> its encoder, ``sbert.shared_base``) share its
batcher and workers too: the batcher keys each request by its adapter, so a merged batch holds one adapter's
texts and runs through that adapter alone, never two adapters in one forward pass. ``lane(name)`` is one
adapter's way in.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
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

    def tokenize(self, texts: Sequence[str], prompt_name: str | None = None, prompt: str | None = None) -> Tokenized:
        """Token ids of ``prompt`` + each text (neither given: the model's default prompt, if any)."""
        ...

    def resolve_prompt(
        self, prompt_name: str | None = None, prompt: str | None = None, task: str | None = None
    ) -> str | None:
        """The prompt a request's texts get (see ``Encoder.resolve_prompt``); ValueError for an unknown name."""
        ...

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

    def __init__(
        self,
        encoder: ServedEncoder,
        settings: EngineSettings | None = None,
        *,
        divide_threads: bool = True,
        adapters: Mapping[str, ServedEncoder] | None = None,
    ) -> None:
        """``divide_threads``: give each worker its share of torch's threads. ``adapters``: the encoders of LoRA
        adapters over ``encoder``'s base, by name, run in this engine's batches (each must give vectors of
        ``encoder``'s size)."""
        settings = settings or EngineSettings()
        on_torch, can_pack = encoder.backend_name == "torch", encoder.can_pack
        if settings.packing and not can_pack:
            raise ValueError("packing needs the torch backend and a BERT-family model")
        self.adapters = dict(adapters or {})
        for name, each in self.adapters.items():
            if each.dim != encoder.dim:
                raise ValueError(f"adapter {name!r} gives {each.dim}-d vectors, the base {encoder.dim}-d")
        self.encoder, self.settings = encoder, settings
        self.packing = can_pack if settings.packing is None else settings.packing
        self.workers = settings.workers_for(on_torch)
        divided = divide_threads and on_torch and self.workers > 1
        self._threads_before = _divide_threads(self.workers) if divided else None
        self.batcher = DynamicBatcher(
            self._run_batch,
            max_batch_texts=settings.max_batch_texts,
            max_wait_ms=settings.max_wait_ms,
            workers=self.workers,
        )

    def lane(self, adapter: str) -> Lane:
        """Adapter ``adapter``'s way into this engine (KeyError for one it does not hold)."""
        if adapter not in self.adapters:
            raise KeyError(f"no adapter {adapter!r} in this engine")
        return Lane(self, adapter)

    async def embed(self, texts: list[str], prompt: str | None = None, adapter: str | None = None) -> Embedded:
        """``texts``' vectors, token counts and truncation, computed in a batch shared with other requests.

        ``prompt`` (from the encoder's ``resolve_prompt``) is put before each text; None: the encoder's default.
        ``adapter``: run them through that adapter (one of ``adapters``); None: the base.
        """
        if adapter is not None and adapter not in self.adapters:
            raise KeyError(f"no adapter {adapter!r} in this engine")
        tagged: list[str] = (
            texts if prompt is None and adapter is None else [_Tagged(t, prompt, adapter) for t in texts]
        )
        return Embedded(*await self.batcher.embed(tagged, key=adapter))

    def close(self, timeout: float = 30.0) -> None:
        """Finish every queued request, stop the workers, restore torch's thread count."""
        self.batcher.close(timeout)
        if self._threads_before is not None:
            import torch

            torch.set_num_threads(self._threads_before)
            self._threads_before = None

    def _run_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One merged batch, on a worker thread: (vectors, token counts, truncated flags) in its order. The
        batcher keys each request by its adapter, so a batch holds one adapter's texts (refused otherwise).
        Each run of texts with one prompt is tokenised once; the batch is embedded as one."""
        adapters = {getattr(text, "adapter", None) for text in texts}
        if len(adapters) > 1:
            raise RuntimeError(f"one batch holds texts of several adapters: {sorted(map(str, adapters))}")
        adapter = next(iter(adapters), None)
        encoder = self.encoder if adapter is None else self.adapters[adapter]
        runs = itertools.groupby(texts, key=lambda text: getattr(text, "prompt", None))
        parts = [_tokenize(encoder, [str(t) for t in run], prompt) for prompt, run in runs]
        tokens = _joined(parts or [_tokenize(encoder, [], None)])  # none: a request without texts
        vectors = encoder.encode_tokenized(
            tokens,
            batch_size=self.settings.max_batch_texts if self.packing else self.settings.encode_batch_size,
            max_tokens=self.settings.max_tokens,
            packing=self.packing,
            show_progress=False,
        )
        truncated = np.zeros(len(texts), dtype=bool)
        truncated[tokens.truncated] = True
        return vectors, np.array(tokens.lengths), truncated


@dataclass(frozen=True)
class Lane:
    """One adapter's way into a shared ``EmbeddingEngine``: its ``encoder``, and ``embed`` as the engine's, with
    that adapter."""

    engine: EmbeddingEngine
    adapter: str

    @property
    def encoder(self) -> ServedEncoder:
        return self.engine.adapters[self.adapter]

    async def embed(self, texts: list[str], prompt: str | None = None) -> Embedded:
        return await self.engine.embed(texts, prompt, self.adapter)

    def close(self, timeout: float = 30.0) -> None:
        """Nothing of its own to stop: the engine it runs in is closed with the base."""


def _tokenize(encoder: ServedEncoder, texts: list[str], prompt: str | None) -> Tokenized:
    return encoder.tokenize(texts) if prompt is None else encoder.tokenize(texts, prompt=prompt)


class _Tagged(str):
    """A request's text as the batcher merges it (its characters), carrying the request's prompt and adapter."""

    prompt: str | None
    adapter: str | None

    def __new__(cls, text: str, prompt: str | None, adapter: str | None = None) -> _Tagged:
        item = super().__new__(cls, text)
        item.prompt, item.adapter = prompt, adapter
        return item


def _joined(parts: list[Tokenized]) -> Tokenized:
    """The tokens of consecutive runs of texts as one batch: positions of truncated texts and prompt
    lengths (0 for texts without a prompt) follow the merged order."""
    if len(parts) == 1:
        return parts[0]
    ids, truncated, prompt_lengths, offset = [], [], [], 0
    for part in parts:
        ids += part.ids
        truncated += [offset + i for i in part.truncated]
        prompt_lengths += part.prompt_lengths or [0] * len(part)
        offset += len(part)
    excluded = any(part.prompt_lengths is not None for part in parts)
    return type(parts[0])(ids, truncated, prompt_lengths if excluded else None)


def _divide_threads(workers: int) -> int:
    """Give each of ``workers`` batch workers its share of torch's threads (a process-wide setting);
    returns the thread count before, to restore at shutdown."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, before // workers))
    return before
