"""Lexical search: BM25 over texts, by the ``bm25s`` library (a core dependency).

Texts and queries are tokenised alike by ``bm25s.tokenize``: lower-cased words of two or more letters
or digits, English stop words removed, no stemming. Scores are BM25 (Lucene's variant, k1 = 1.5,
b = 0.75). Only rows that share a word with the query are found: the others score 0 and never come
back. Results are ranked best first by ``sbert.search.ranking``.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sbert.atomic import atomic_file
from sbert.errors import IndexFormatError
from sbert.search import ranking
from sbert.search.exact import TopK

STOPWORDS = "en"
_FORMAT = "sbert-bm25"
_SETTINGS = "sbert.json"  # our own record inside the archive, beside bm25s's files


def _bm25s() -> Any:
    """``bm25s``, imported so that it does not take a GPU: where JAX is installed, importing bm25s runs a
    JAX top-k, and JAX then reserves 75% of the GPU's memory for itself (a 49 GiB process seen beside
    sbert's own models on an 80 GiB H100). sbert never uses bm25s' JAX path (it ranks ``get_scores`` itself),
    so JAX is asked not to reserve memory up front, unless the user has said otherwise."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import bm25s
    except ImportError as err:
        raise ImportError("lexical (BM25) search needs bm25s, a dependency of sbert: pip install bm25s") from err
    return bm25s


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """The words BM25 counts in each text (see the module)."""
    return _bm25s().tokenize(list(texts), stopwords=STOPWORDS, return_ids=False, show_progress=False)


class BM25:
    """A BM25 index over ``rows`` texts, row i being the i-th text it was built from; ``keys``: what each
    row stands for (an index of documents keeps one row per document, keyed by its id), or None."""

    def __init__(
        self, retriever: Any, rows: int, k1: float = 1.5, b: float = 0.75, keys: list[str] | None = None
    ) -> None:
        self._retriever, self.rows, self.k1, self.b, self.keys = retriever, rows, k1, b, keys

    @classmethod
    def build(
        cls, texts: Sequence[str | None], k1: float = 1.5, b: float = 0.75, keys: Sequence[str] | None = None
    ) -> BM25:
        """Index ``texts`` (None counts as an empty text); ``keys``: one per text, kept with the index."""
        if keys is not None and len(keys) != len(texts):
            raise ValueError(f"{len(keys)} keys for {len(texts)} texts")
        keys = None if keys is None else [str(key) for key in keys]
        if not texts:
            return cls(None, 0, k1, b, keys)
        retriever = _bm25s().BM25(k1=k1, b=b)
        retriever.index(tokenize([t or "" for t in texts]), show_progress=False)
        return cls(retriever, len(texts), k1, b, keys)

    def scores(self, query: str) -> np.ndarray:
        """(rows,) float32 BM25 score of every row for ``query`` (0 where no word is shared)."""
        words = tokenize([query])[0]
        words = [w for w in words if self._retriever is not None and w in self._retriever.vocab_dict]
        if not words:
            return np.zeros(self.rows, dtype=np.float32)
        return np.asarray(self._retriever.get_scores(words), dtype=np.float32)

    def search(self, queries: Sequence[str], k: int, exclude: np.ndarray | None = None) -> TopK:
        """Each query's best ``k`` rows (scores (n, k) float32, rows (n, k) int64), best first; rows that
        share no word with the query, and rows in ``exclude``, are left out (row -1, score -inf). A ``k``
        beyond the index's rows is cut to them."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        k = min(k, max(1, self.rows))
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        rows = np.full((len(queries), k), -1, dtype=np.int64)
        for n, query in enumerate(queries):
            s = self.scores(query)
            if exclude is not None and len(exclude):
                s[exclude] = 0
            found = np.flatnonzero(s > 0)
            best_scores, best_rows = ranking.top(s[found][None], found[None], k)
            scores[n, : best_rows.shape[1]], rows[n, : best_rows.shape[1]] = best_scores[0], best_rows[0]
        return TopK(scores, rows)

    # -- persistence -------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The index as one zip archive: bm25s's own files, plus the row count and settings."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            settings = {"format": _FORMAT, "rows": self.rows, "k1": self.k1, "b": self.b, "stopwords": STOPWORDS}
            if self.keys is not None:
                settings["keys"] = self.keys
            archive.writestr(_SETTINGS, json.dumps(settings))
            if self._retriever is not None:
                with tempfile.TemporaryDirectory() as folder:
                    self._retriever.save(folder, show_progress=False)
                    for file in sorted(Path(folder).iterdir()):
                        archive.write(file, file.name)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, source: str | Path, rows: int | None = None) -> BM25:
        """The index in ``data`` (read from ``source``, named in errors); ``rows``: the count it must hold
        (None: any)."""
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                settings = json.loads(archive.read(_SETTINGS))
                if not isinstance(settings, dict) or settings.get("format") != _FORMAT:
                    raise ValueError("not an sbert BM25 index")
                count = settings["rows"]
                keys = settings.get("keys")
                if keys is not None and (not isinstance(keys, list) or len(keys) != count):
                    raise ValueError(f"{len(keys) if isinstance(keys, list) else keys!r} keys for {count} rows")
                retriever = _load(archive) if count else None
        except (zipfile.BadZipFile, KeyError, ValueError, TypeError, OSError) as err:
            raise IndexFormatError(f"{source}: not a readable BM25 index ({err}); the index is damaged") from err
        held = 0 if retriever is None else int(retriever.scores["num_docs"])
        if held != count or (rows is not None and count != rows):
            raise IndexFormatError(f"{source}: holds {held} BM25 rows; {rows} expected; the index is damaged")
        return cls(retriever, count, settings.get("k1", 1.5), settings.get("b", 0.75), keys)

    def save(self, file: str | Path) -> None:
        """Write to ``file`` atomically."""
        with atomic_file(Path(file)) as handle:
            handle.write(self.to_bytes())

    @classmethod
    def load(cls, file: str | Path) -> BM25:
        try:
            data = Path(file).read_bytes()
        except OSError as err:
            raise IndexFormatError(f"{file}: cannot be read ({err.strerror})") from err
        return cls.from_bytes(data, file)


def _load(archive: zipfile.ZipFile) -> Any:
    """bm25s's index from the archive's files (unpacked to a temporary folder, which bm25s reads)."""
    with tempfile.TemporaryDirectory() as folder:
        for name in archive.namelist():
            if name != _SETTINGS and "/" not in name and not name.startswith("."):
                (Path(folder) / name).write_bytes(archive.read(name))
        return _bm25s().BM25.load(folder, show_progress=False, mmap=False)
