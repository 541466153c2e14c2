"""The inference pipeline, step by step: texts -> ``Tokenized`` -> batches (padded or packed) -> a runner -> vectors.

``Encoder.encode`` is these steps composed: ``Encoder.tokenize`` gives the ids of each text and which
were truncated; a ``Batching`` groups them (smart batching, ``sbert.batching``) and lays each group
out padded or packed, a choice made once per run; a runner (``TorchRunner``, or the ONNX backend's
``OnnxBackend``) turns each collated batch into sentence vectors; ``finish`` cuts and normalises them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sbert.batching import batches
from sbert.modules.base import Features

PACKED_TOKENS = 8_192  # real tokens per packed forward pass when max_tokens is not given


@dataclass(frozen=True)
class Tokenized:
    """Token ids of a list of texts (special tokens added, cut to the model's maximum length).

    ``truncated`` holds the positions of the texts that were cut. ``prompt_lengths`` (per text, or None)
    counts the prompt tokens that a Pooling with ``include_prompt=False`` leaves out (``sbert.prompts``).
    """

    ids: list[list[int]]
    truncated: list[int]
    prompt_lengths: list[int] | None = None

    @property
    def lengths(self) -> list[int]:
        """Tokens per text, special tokens included (what was run, after truncation)."""
        return [len(ids) for ids in self.ids]

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, rows: Sequence[int]) -> Tokenized:
        """These texts' ids at ``rows`` (``truncated`` counted anew among them)."""
        cut = set(self.truncated)
        lengths = None if self.prompt_lengths is None else [self.prompt_lengths[r] for r in rows]
        return Tokenized([self.ids[r] for r in rows], [n for n, r in enumerate(rows) if r in cut], lengths)


class VectorMemo:
    """Sentence vectors already computed, keyed by a digest of their token ids, prompt length and the
    ``setting`` they were returned with (runner, width, normalisation): within ``Encoder.reusing_vectors``
    a text or window embedded once is looked up instead of run again. ``reused`` and ``computed`` count
    rows. Holds one float32 vector and a 16-byte key a distinct row."""

    def __init__(self) -> None:
        self._vectors: dict[bytes, np.ndarray] = {}
        self.reused = 0
        self.computed = 0

    def __len__(self) -> int:
        return len(self._vectors)

    @staticmethod
    def keys(tokens: Tokenized, setting: str) -> list[bytes]:
        import hashlib

        lengths = tokens.prompt_lengths or [-1] * len(tokens)
        out = []
        for ids, prompt in zip(tokens.ids, lengths, strict=True):
            digest = hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16)
            digest.update(f"|{prompt}|{setting}".encode())
            out.append(digest.digest())
        return out

    def fill(self, keys: Sequence[bytes], out: np.ndarray) -> list[int]:
        """Write the vectors known for ``keys`` into the rows of ``out``; the rows still to compute."""
        missing = []
        for row, key in enumerate(keys):
            known = self._vectors.get(key)
            if known is None:
                missing.append(row)
            else:
                out[row] = known
        self.reused += len(keys) - len(missing)
        return missing

    def store(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        for key, vector in zip(keys, vectors, strict=True):
            self._vectors[key] = np.array(vector, dtype=np.float32)
        self.computed += len(keys)


Collate = Callable[[Sequence[Sequence[int]]], Features]


@dataclass(frozen=True)
class Batching:
    """How one run groups its texts into forward passes and lays each pass out.

    ``packed`` says which ``collate`` this is: padded (``Transformer.collate``) or packed
    (``Transformer.collate_packed``, checked packable when this was made). ``max_tokens`` caps
    padded token slots per pass, or real tokens when packed.
    """

    collate: Collate
    packed: bool
    batch_size: int
    sort_by_length: bool = True
    max_tokens: int | None = None

    def batches(self, lengths: Sequence[int]) -> Iterator[np.ndarray]:
        """Row indices of each forward pass (see ``sbert.batching.batches``)."""
        return batches(lengths, self.batch_size, self.sort_by_length, self.max_tokens, self.packed)


class Runner(Protocol):
    """Runs a collated batch: what ``Encoder.encode`` needs from a backend."""

    name: str  # "torch" or "onnx"
    precision: str

    def sentences(self, features: Features, packed: bool = False) -> torch.Tensor:
        """Sentence vectors (B, dim) of one collated batch."""
        ...


class TorchRunner:
    """Runs a torch model on its own device, fp32 or bf16 (autocast): ``model(features, packed=...)``.

    ``shortcut`` (optional) gives a padded fp32 batch's sentence vectors without running the modules, or None
    where it cannot (a static model's table mean in numpy: ``Encoder.table_sentences``)."""

    name = "torch"

    def __init__(
        self,
        model: nn.Module,
        precision: str = "fp32",
        shortcut: Callable[[Features], torch.Tensor | None] | None = None,
    ) -> None:
        self.model, self.precision, self.shortcut = model, precision, shortcut

    def features(self, features: Features, packed: bool = False) -> Features:
        """All output features of a batch (``token_embeddings``, ``sentence_embedding``, ...)."""
        device = next(self.model.parameters()).device
        autocast = torch.autocast(device.type, dtype=torch.bfloat16) if self.precision == "bf16" else None
        with autocast or contextlib.nullcontext():
            return self.model({k: v.to(device) for k, v in features.items()}, packed=packed)

    def sentences(self, features: Features, packed: bool = False) -> torch.Tensor:
        if self.shortcut is not None and not packed and self.precision == "fp32":
            vectors = self.shortcut(features)
            if vectors is not None:
                return vectors
        return self.features(features, packed)["sentence_embedding"]


def finish(vectors: torch.Tensor, width: int, normalize: bool) -> np.ndarray:
    """Sentence vectors as returned: the first ``width`` coordinates, then unit length if ``normalize``."""
    vectors = vectors[:, :width]
    if normalize:
        vectors = F.normalize(vectors, p=2, dim=1)
    return vectors.float().cpu().numpy()


def token_vectors(features: Features, normalize: bool) -> list[np.ndarray]:
    """Each text's token vectors (n_tokens, hidden) without padding, unit length if ``normalize``."""
    tokens = features["token_embeddings"]
    if normalize:
        tokens = F.normalize(tokens, p=2, dim=-1)
    vectors = tokens.float().cpu().numpy()
    mask = features["attention_mask"].bool().cpu().numpy()
    return [vectors[k][mask[k]] for k in range(len(vectors))]
