"""What a search answers and how it is asked: one ``Hit`` (and its one JSON shape), ``Hybrid`` options.

Every index (``sbert.search.index``: a folder, a PostgreSQL table, memory) returns ``Hit``s best first; what
an index is, and its checks, is ``sbert.search.index.base``; which index lives at a location is
``sbert.search.index.homes``; how texts become rows and queries become hits is ``sbert.search.retrieve``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sbert.search.fusion import ALPHA, CANDIDATES, DEFAULT_FUSION, RRF_K

__all__ = ["Hit", "Hybrid"]


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
