"""Search structures: one class per way of searching an index's rows, behind one interface.

``Exact`` scans the float32 rows themselves and keeps nothing of its own. ``HNSW`` (a FAISS graph,
approximate), ``Int8`` and ``Binary`` (FAISS quantised scans whose best candidates are re-scored with
the float32 rows) each keep their data in one file, which the segment store names, holds open and
removes. Every ``search`` returns each query's best ``k`` live rows by score descending, then row
ascending (``ranking.top``), padded with rows -1 where fewer exist.
"""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, ClassVar, Protocol

import numpy as np

from sbert.errors import IndexFormatError
from sbert.progress import progress_bar
from sbert.search import ranking
from sbert.search.exact import TopK, semantic_search

SUFFIX = ".faiss"  # the ending of the structures' files
BUILD_FROM = 100_000  # rows from which building or adding to a structure shows a progress bar (on a terminal)


class Rows(Protocol):
    """The index's rows as a structure searches them (a store ``Snapshot``)."""

    vectors: np.ndarray  # (n, dim) float32, deleted rows included
    deleted: np.ndarray  # deleted row numbers
    alive_bits: np.ndarray  # one bit per row (little-endian order), set where the row is live


class Structure(ABC):
    """A way to search an index: built from its vectors, added to, searched, written to and read from a file."""

    name: ClassVar[str]
    settings: ClassVar[tuple[str, ...]] = ()  # what the manifest records of it, each a positive integer

    @classmethod
    @abstractmethod
    def build(cls, vectors: np.ndarray, config: dict, progress: bool | None) -> Structure:
        """A structure over (n, dim) float32 ``vectors`` (rows 0 to n-1), with the settings in ``config``."""

    @abstractmethod
    def add(self, vectors: np.ndarray, progress: bool | None) -> None:
        """Append ``vectors`` as the next rows."""

    @abstractmethod
    def search(
        self, queries: np.ndarray, k: int, rows: Rows, *, ef_search: int | None = None, rescore: int | None = None
    ) -> TopK:
        """The best ``k`` live rows for each of the (n, dim) float32 ``queries``, best first."""

    @abstractmethod
    def to_bytes(self) -> bytes:
        """The structure as written to its file."""

    @classmethod
    @abstractmethod
    def load(cls, handle: IO[bytes], file: Path, config: dict, dim: int, count: int) -> Structure:
        """Read a structure from an open ``file``, checking it holds ``count`` rows of width ``dim``."""


class Exact(Structure):
    """Brute force over the float32 rows (``semantic_search``, candidates re-scored in float64). The rows
    are its only data, and the store keeps them: building, adding and writing have nothing to do."""

    name = "exact"

    @classmethod
    def build(cls, vectors: np.ndarray, config: dict, progress: bool | None) -> Exact:
        return cls()

    def add(self, vectors: np.ndarray, progress: bool | None) -> None:
        pass

    def to_bytes(self) -> bytes:
        return b""

    @classmethod
    def load(cls, handle: IO[bytes], file: Path, config: dict, dim: int, count: int) -> Exact:
        return cls()

    def search(
        self, queries: np.ndarray, k: int, rows: Rows, *, ef_search: int | None = None, rescore: int | None = None
    ) -> TopK:
        if not len(rows.deleted):
            return _pad(*semantic_search(queries, rows.vectors, k, score="dot"), k)
        wide = min(k + len(rows.deleted), len(rows.vectors))  # room for every deleted row among the best
        found = semantic_search(queries, rows.vectors, wide, score="dot")
        dead = np.isin(found.indices, rows.deleted)
        return _pad(*ranking.top(np.where(dead, -np.inf, found.scores), np.where(dead, -1, found.indices), k), k)


class _Faiss(Structure):
    """A structure kept in a FAISS index whose row i is the index's row i."""

    def __init__(self, index: Any, config: dict) -> None:
        self.index, self.config = index, config

    @classmethod
    def build(cls, vectors: np.ndarray, config: dict, progress: bool | None) -> _Faiss:
        structure = cls(cls._empty(vectors, config), config)
        structure.add(vectors, progress)
        return structure

    @classmethod
    @abstractmethod
    def _empty(cls, vectors: np.ndarray, config: dict) -> Any:
        """A new FAISS index for rows like ``vectors`` (trained on them where it needs to be)."""

    @staticmethod
    @abstractmethod
    def _kind(faiss: Any) -> type:
        """The FAISS class a file of this structure must hold."""

    def add(self, vectors: np.ndarray, progress: bool | None, chunk: int = 16384) -> None:
        with progress_bar(len(vectors), f"building {self.name}", progress, "vec", from_items=BUILD_FROM) as bar:
            for start in range(0, len(vectors), chunk):
                part = vectors[start : start + chunk]
                self.index.add(self._codes(part))
                bar.update(len(part))

    def _codes(self, x: np.ndarray) -> np.ndarray:
        """What FAISS stores and searches for float32 rows ``x``."""
        return x

    def to_bytes(self) -> bytes:
        return _faiss().serialize_index(self.index).tobytes()

    @staticmethod
    def _read(faiss: Any, reader: Any) -> Any:
        return faiss.read_index(reader)

    @classmethod
    def load(cls, handle: IO[bytes], file: Path, config: dict, dim: int, count: int) -> _Faiss:
        faiss = _faiss()
        try:
            index = cls._read(faiss, faiss.PyCallbackIOReader(handle.read))
        except (RuntimeError, MemoryError, ValueError) as err:
            reason = re.sub(r"^Error in .*? at \S+:\d+: (Error: )?", "", str(err).strip().splitlines()[-1])[:160]
            raise IndexFormatError(f"{file}: unreadable {cls.name} structure ({reason}); the index is damaged") from err
        if not isinstance(index, cls._kind(faiss)):
            raise IndexFormatError(
                f"{file}: holds a {type(index).__name__}, not the {cls.name} structure; the index is damaged"
            )
        if index.d != dim or index.ntotal != count:
            raise IndexFormatError(
                f"{file}: holds {index.ntotal} rows of width {index.d}; the index has {count} of width {dim}; "
                "the index is damaged"
            )
        return cls(index, config)

    def search(
        self, queries: np.ndarray, k: int, rows: Rows, *, ef_search: int | None = None, rescore: int | None = None
    ) -> TopK:
        faiss = _faiss()
        factor = self._rescore(rescore)
        fetch = max(1, min(k * factor, len(rows.vectors)))
        if ef_search is not None:  # a breadth past the rows finds no more, and FAISS would allocate all of it
            ef_search = max(1, min(ef_search, len(rows.vectors)))
        params = self._params(faiss, fetch, ef_search)
        if len(rows.deleted):
            params.sel = faiss.IDSelectorBitmap(len(rows.vectors), faiss.swig_ptr(rows.alive_bits))
        with _faiss_threads(1 if len(queries) < 16 else None):
            scores, found = self._scan(queries, fetch, params)
        if factor > 1:  # the candidates' float32 scores
            best = rows.vectors[np.maximum(found, 0)]
            scores = np.where(found >= 0, np.einsum("qd,qkd->qk", queries, best), -np.inf)
        return _pad(*ranking.top(scores.astype(np.float32), found.astype(np.int64), k), k)

    def _rescore(self, rescore: int | None) -> int:
        """Candidates fetched per result wanted, to be re-scored with the float32 rows (1: none)."""
        return 1

    def _params(self, faiss: Any, fetch: int, ef_search: int | None) -> Any:
        return faiss.SearchParameters()

    def _scan(self, queries: np.ndarray, fetch: int, params: Any) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(queries, fetch, params=params)


class HNSW(_Faiss):
    """A FAISS HNSW graph: approximate, ``M`` links per node, ``ef_search`` candidates per search."""

    name = "hnsw"
    settings = ("M", "ef_construction", "ef_search")

    @classmethod
    def _empty(cls, vectors: np.ndarray, config: dict) -> Any:
        faiss = _faiss()
        index = faiss.IndexHNSWFlat(vectors.shape[1], config["M"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config["ef_construction"]
        return index

    @staticmethod
    def _kind(faiss: Any) -> type:
        return faiss.IndexHNSW

    def _params(self, faiss: Any, fetch: int, ef_search: int | None) -> Any:
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(ef_search or self.config["ef_search"], fetch)
        return params


class _Quantised(_Faiss):
    """A scan of compressed rows, whose best ``k x rescore`` are re-scored with the float32 rows."""

    default_rescore: ClassVar[int]

    def _rescore(self, rescore: int | None) -> int:
        return rescore or self.default_rescore


class Int8(_Quantised):
    """FAISS's 8-bit scalar quantiser, its per-dimension ranges trained on the vectors at build time."""

    name = "int8"
    default_rescore = 4

    @classmethod
    def _empty(cls, vectors: np.ndarray, config: dict) -> Any:
        faiss = _faiss()
        index = faiss.IndexScalarQuantizer(vectors.shape[1], faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        return index

    @staticmethod
    def _kind(faiss: Any) -> type:
        return faiss.IndexScalarQuantizer


class Binary(_Quantised):
    """One bit per coordinate (its sign), scanned by Hamming distance: fewer differing bits = more similar."""

    name = "binary"
    default_rescore = 10

    @classmethod
    def _empty(cls, vectors: np.ndarray, config: dict) -> Any:
        return _faiss().IndexBinaryFlat(vectors.shape[1])

    @staticmethod
    def _kind(faiss: Any) -> type:
        return faiss.IndexBinaryFlat

    def _codes(self, x: np.ndarray) -> np.ndarray:
        return np.packbits(x > 0, axis=1)  # (n, d) float -> (n, d/8) uint8

    def to_bytes(self) -> bytes:
        return _faiss().serialize_index_binary(self.index).tobytes()

    @staticmethod
    def _read(faiss: Any, reader: Any) -> Any:
        return faiss.read_index_binary(reader)

    def _scan(self, queries: np.ndarray, fetch: int, params: Any) -> tuple[np.ndarray, np.ndarray]:
        dist, found = self.index.search(self._codes(queries), fetch, params=params)
        return -dist.astype(np.float32), found


EXACT = Exact()
# The structures kept in files, in the order ``default_method`` prefers them.
STORED: dict[str, type[_Faiss]] = {kind.name: kind for kind in (HNSW, Int8, Binary)}


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as err:  # pragma: no cover - faiss-cpu is a dependency
        raise ImportError("approximate and quantised search need faiss: pip install faiss-cpu") from err
    return faiss


@contextlib.contextmanager
def _faiss_threads(threads: int | None) -> Iterator[None]:
    """Run FAISS with ``threads`` OpenMP threads (None: unchanged). A few queries run faster on one
    thread: waking the others costs more than they save, and far more on a busy machine."""
    if threads is None:
        yield
        return
    faiss = _faiss()
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _pad(scores: np.ndarray, rows: np.ndarray, k: int) -> TopK:
    """Widen to ``k`` columns with (-inf, -1), and mark -inf entries as missing."""
    if scores.shape[1] < k:
        extra = k - scores.shape[1]
        scores = np.hstack([scores, np.full((len(scores), extra), -np.inf, np.float32)])
        rows = np.hstack([rows, np.full((len(rows), extra), -1, np.int64)])
    rows = np.where(np.isneginf(scores), -1, rows)
    return TopK(scores.astype(np.float32), rows.astype(np.int64))
