"""What every index is: one protocol, one hit, one way to open one.

Three classes keep an index and answer alike: ``VectorIndex`` (a folder, ``sbert.search.index.folder``),
``PgVectorIndex`` (a PostgreSQL table, ``sbert.search.index.postgres``) and ``MemoryIndex`` (in memory,
``sbert.search.index.memory``: what ``sbert eval`` builds). Each follows ``Index``: ``add``/``delete`` rows, and
``search`` by query vectors (with the query texts for hybrid search) returning ``Hit``s best first. How
texts become rows and queries become hits, the same for every index and every caller (the CLI, the
service, the evaluation), is ``sbert.search.retrieve``.

``open_index(location)`` (in ``sbert.search.retrieve``, above every index class) opens a folder or a
``postgresql://`` URL; ``is_database_url`` and ``split_location`` here tell them apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from sbert.search.fusion import ALPHA, CANDIDATES, DEFAULT_FUSION, RRF_K

__all__ = ["DEFAULT_TABLE", "Hit", "Hybrid", "Index", "is_database_url", "split_location"]

DEFAULT_TABLE = "sbert_index"  # the table of an index at a postgresql:// URL without one
SCHEMES = ("postgresql://", "postgres://")


class Hit(NamedTuple):
    """One search result: the row's ``id``, its ``score``, its ``text`` (or None) and ``row``. In an index
    of documents: the document's id, its score, its best passage, that window's row and character ``span``.
    ``title``: the document's title where the corpus had one (``title`` in JSON lines, ``--title-column``),
    else None (and in indexes built before titles were kept; a PostgreSQL index keeps it in the text).
    ``lead``: set on the top hit a search with a ``lead`` keeps (``sbert.search.retrieve.lead``; inf where
    the index holds one row), else None.

    ``score`` ranks the hits of one search: a dense search's similarity, a fused search's fusion score
    (weighted fusion's is relative to the query's own candidates: its best is near 1 whatever it is), a
    re-ranked search's cross-encoder score. ``cosine`` is the same for every search: the cosine similarity of
    the query's vector and the hit's (a document's: its best window's, or its mean vector's in ``mean``
    mode), what ``threshold`` and ``lead`` compare; None where a hit has no vector (a retriever's own)."""

    id: str
    score: float
    text: str | None
    row: int
    span: tuple[int, int] | None = None
    title: str | None = None
    lead: float | None = None  # a search with a lead: how far this top hit's cosine leads hits 2-10's mean
    cosine: float | None = None

    def as_json(self) -> dict[str, Any]:
        """The hit as ``sbert search --json`` and the service answer it: id, score, cosine (where known), text
        and row, then span, title and lead where set (a lead with nothing to lead, inf, as null: JSON has no
        infinity)."""
        out: dict[str, Any] = {"id": self.id, "score": self.score}
        if self.cosine is not None:
            out["cosine"] = self.cosine
        out |= {"text": self.text, "row": self.row}
        if self.span is not None:
            out["span"] = list(self.span)
        if self.title:
            out["title"] = self.title
        if self.lead is not None:
            out["lead"] = self.lead if math.isfinite(self.lead) else None
        return out


@dataclass(frozen=True)
class Hybrid:
    """Fuse the dense results with BM25's for the queries' ``texts``: ``fusion`` rrf or weighted (``alpha``:
    the dense side's weight), ``candidates`` results from each side (see ``sbert.search.fusion``)."""

    texts: Sequence[str]
    fusion: str = DEFAULT_FUSION
    alpha: float = ALPHA
    rrf_k: int = RRF_K
    candidates: int = CANDIDATES


@runtime_checkable
class Index(Protocol):
    """An index of rows (texts, or windows of documents) with the model that embedded them.

    ``manifest`` records the model, ``dim``, ``metric``, ``backend``, and for an index of documents its
    ``documents`` settings (``window``, ``overlap``, ``mode``, ``prompt``); ``lexical``: whether it keeps
    BM25 for hybrid search. ``search`` returns, per query, at most ``k`` ``Hit``s best first (score
    descending, then row); in an index of documents, documents with their best passage.
    """

    path: str | Path

    @property
    def manifest(self) -> dict: ...

    @property
    def documents(self) -> dict | None: ...

    @property
    def document_ids(self) -> list[str]: ...

    @property
    def lexical(self) -> bool: ...

    @property
    def model(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def __len__(self) -> int: ...

    def check_model(self, name_or_path: str | Path, dim: int | None = None) -> None: ...

    def check_backend(self, backend: str | None, allow_mixed: bool = False) -> None: ...

    def search(self, queries: Any, k: int = 10, **options: Any) -> list[list[Hit]]: ...

    def add(self, embeddings: Any, ids: Sequence[str] | None = None, texts: Any = None, **options: Any) -> None: ...

    def delete(self, ids: Iterable[str]) -> int: ...


def is_database_url(location: str | Path) -> bool:
    """Whether ``location`` is a ``postgresql://`` (or ``postgres://``) URL rather than a folder."""
    return isinstance(location, str) and location.startswith(SCHEMES)


def split_location(location: str, table: str | None = None) -> tuple[str, str]:
    """(URL, table) from ``postgresql://...[#table]``; ``table`` wins over the fragment."""
    url, _, fragment = location.partition("#")
    return url, table or fragment or DEFAULT_TABLE
