"""How a retrieval evaluation retrieves: through the index code that ``sbert index build`` + ``sbert search``
run (``IndexRetriever``), so that what ``sbert eval`` measures is what is served.

A ``Retriever`` is ``index(model, documents)`` once, then ``search(model, queries, k)`` -> per query its
hits best first (``sbert.search.base.Hit``, or ``(document id, score)``: the evaluator reads the first two
fields). Documents are ``Document.joined`` (title + " " + text) and kept in id order, so equal scores rank
by id.

- ``IndexRetriever``: ``RetrievalSettings`` (whole or in windows, hybrid with BM25, re-ranked) applied by
  ``sbert.search.retrieve``: the documents built into a ``MemoryIndex`` (or an index at ``location``: a
  folder or a ``postgresql://`` URL), queries searched as ``sbert search`` searches them.
- ``LexicalRetriever``: BM25 alone (``sbert.search.lexical``), a baseline; the model is not used.
- ``HybridRetriever``, ``RerankRetriever``: fusion with BM25 and cross-encoder re-ranking around any
  retriever of your own (``sbert.search.fusion``, ``sbert.search.rerank``: the same code the index runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import copy
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from sbert.data.beir import Document
from sbert.search.auto import KIND as AUTO_KIND
from sbert.search.auto import QUERIES as AUTO_QUERIES
from sbert.search.exact import TopK
from sbert.windows import MAX_WINDOWS

Hit = tuple[str, float]  # what a retriever of your own may return: (document id, score), best first


@runtime_checkable
class Retriever(Protocol):
    """How a retrieval evaluation embeds and searches documents.

    ``index(model, documents)`` is called once per evaluation, before any search, with every document
    of the corpus (``Document``: id, title, text). ``search(model, queries, k)`` returns, for each query
    text, at most ``k`` hits best first (``sbert.search.base.Hit`` or ``(document id, score)``); the
    evaluator takes that order as it is. It is timed per query (embedding the query included), so it
    should do all of a query's work.
    """

    def index(self, model: Any, documents: Sequence[Document], show_progress: bool | None = None) -> None: ...

    def search(self, model: Any, queries: Sequence[str], k: int) -> list[list[Any]]: ...


def _ordered(documents: Sequence[Document], separator: str) -> tuple[list[str], list[str]]:
    ordered = sorted(documents, key=lambda d: d.id)
    return [d.id for d in ordered], [d.joined(separator) for d in ordered]


class IndexRetriever:
    """Retrieval as ``sbert index build`` + ``sbert search`` do it, with ``settings`` (``RetrievalSettings``):
    ``index`` builds the documents (in id order) into a ``MemoryIndex``, or into an index at ``location``
    (a folder or a ``postgresql://`` URL, replaced if there), or uses ``index`` as it is (already built
    from these documents with this model); ``search`` embeds the queries with ``encode_query`` and
    searches through a ``sbert.search.searcher.Searcher``, as ``sbert search`` and ``sbert serve`` do."""

    def __init__(
        self,
        settings: RetrievalSettings | None = None,
        location: str | Path | None = None,
        separator: str = " ",
        index: Any = None,
    ) -> None:
        self.settings = settings or RetrievalSettings()
        if self.settings.lexical:
            raise ValueError("BM25 alone is LexicalRetriever's: an index holds embeddings")
        self.location, self.separator, self.built = location, separator, index
        self._scorer: Any = None

    def index(self, model: Any, documents: Sequence[Document], show_progress: bool | None = None) -> None:
        from sbert.search.retrieve import build_index

        if self.location is None and self.built is not None and not documents:
            return
        ids, texts = _ordered(documents, self.separator)
        self.built = build_index(
            self.location,
            model,
            texts,
            ids,
            model=getattr(model, "name_or_path", None) or "model",
            metric=_metric(model),
            chunking=self.settings.chunking(),
            bm25=self.settings.hybrid,
            batch_size=self.settings.batch_size,
            show_progress=show_progress,
            overwrite=True,
        )

    def search(self, model: Any, queries: Sequence[str], k: int) -> list[list[Any]]:
        from sbert.search.searcher import Searcher

        if self.built is None:
            raise RuntimeError(f"{type(self).__name__}.search before index: index the documents first")
        searcher = Searcher(self.built, model, self._cross_encoder())  # as `sbert search` searches
        options = self.settings.search_options(k, searcher.rerank)
        return searcher.search(queries, options, batch_size=self.settings.batch_size, on_truncation="ignore")

    def scored_by(self, mode: str) -> IndexRetriever:
        """The same index (no second embedding), documents scored by ``mode`` instead."""
        other = copy(self)
        other.settings = replace(self.settings, mode=mode)
        return other

    def _cross_encoder(self) -> Any:
        if self._scorer is None and self.settings.rerank is not None:
            self._scorer = self.settings.cross_encoder()
        return self._scorer


def _metric(model: Any) -> str:
    """The index metric of the model's similarity function (cosine, or dot); cosine for any other."""
    name = getattr(model, "similarity_fn_name", None)
    return name if name in ("cosine", "dot") else "cosine"


class LexicalRetriever:
    """BM25 over the documents' words (``sbert.search.lexical.BM25``, parameters ``k1`` and ``b``)."""

    def __init__(self, k1: float = 1.5, b: float = 0.75, separator: str = " ") -> None:
        self.k1, self.b, self.separator = k1, b, separator
        self.ids: list[str] = []
        self.bm25: Any = None

    def index(self, model: Any, documents: Sequence[Document], show_progress: bool | None = None) -> None:
        from sbert.search.lexical import BM25

        self.ids, texts = _ordered(documents, self.separator)
        self.bm25 = BM25.build(texts, self.k1, self.b)

    def search(self, model: Any, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if self.bm25 is None:
            raise RuntimeError("LexicalRetriever.search before index: index the documents first")
        return _hits(self.bm25.search(list(queries), k), self.ids)


class HybridRetriever:
    """A retriever of your own fused with BM25: each side's best ``candidates`` per query, then ``fusion``
    (``rrf``, or ``weighted`` with the dense side's weight ``alpha``; ``sbert.search.fusion``, as the index
    fuses). For the index's own dense search use ``IndexRetriever(RetrievalSettings(hybrid=True))``: an
    ``IndexRetriever`` given here becomes exactly that."""

    def __new__(cls, dense: Retriever | None = None, fusion: str | None = None, alpha: float | None = None, **rest):
        if not rest and (dense is None or type(dense) is IndexRetriever):
            settings = (dense.settings if dense is not None else RetrievalSettings()).with_hybrid(fusion, alpha)
            return IndexRetriever(settings, separator=getattr(dense, "separator", " "))
        return super().__new__(cls)

    def __init__(
        self,
        dense: Retriever | None = None,
        fusion: str | None = None,
        alpha: float | None = None,
        candidates: int | None = None,
        lexical: LexicalRetriever | None = None,
    ) -> None:
        from sbert.search import fusion as fusions

        fusion = fusion or fusions.DEFAULT_FUSION
        if fusion not in fusions.FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(fusions.FUSIONS)}, got {fusion!r}")
        self.dense, self.lexical = dense if dense is not None else IndexRetriever(), lexical or LexicalRetriever()
        self.fusion = fusion
        self.alpha = fusions.ALPHA if alpha is None else alpha
        self.candidates = fusions.CANDIDATES if candidates is None else candidates
        self.row_of: dict[str, int] = {}
        self.ids: list[str] = []

    def index(self, model: Any, documents: Sequence[Document], show_progress: bool | None = None) -> None:
        self.dense.index(model, documents, show_progress=show_progress)
        self.lexical.index(model, documents, show_progress=show_progress)
        self.ids = sorted(d.id for d in documents)
        self.row_of = {doc: row for row, doc in enumerate(self.ids)}

    def search(self, model: Any, queries: Sequence[str], k: int) -> list[list[Hit]]:
        from sbert.search.fusion import fuse

        wide = min(max(k, self.candidates), max(1, len(self.ids)))  # never wider than the documents
        dense, lexical = (self._top(side.search(model, queries, wide), wide) for side in (self.dense, self.lexical))
        return _hits(fuse(dense, lexical, k, fusion=self.fusion, alpha=self.alpha), self.ids)

    def _top(self, hits: list[list[Any]], width: int) -> TopK:
        """Hits as a ``TopK`` over this retriever's rows (padded with row -1, score -inf)."""
        scores = np.full((len(hits), width), -np.inf, dtype=np.float32)
        rows = np.full((len(hits), width), -1, dtype=np.int64)
        for n, row in enumerate(hits):
            row = row[:width]
            rows[n, : len(row)] = [self.row_of[hit[0]] for hit in row]
            scores[n, : len(row)] = [hit[1] for hit in row]
        return TopK(scores, rows)


class RerankRetriever:
    """``first`` (any retriever) finds each query's best ``candidates`` documents; ``cross_encoder`` (a
    one-label ``PairScorer``) scores (query, document text) and the best ``k`` by its score are returned
    (``sbert.search.rerank``: the index's re-ranking)."""

    def __init__(
        self, first: Retriever, cross_encoder: Any, candidates: int = 100, batch_size: int = 32, separator: str = " "
    ) -> None:
        if candidates < 1:
            raise ValueError(f"candidates must be at least 1, got {candidates}")
        self.first, self.cross_encoder, self.candidates = first, cross_encoder, candidates
        self.batch_size, self.separator = batch_size, separator
        self.texts: dict[str, str] = {}

    def index(self, model: Any, documents: Sequence[Document], show_progress: bool | None = None) -> None:
        self.first.index(model, documents, show_progress=show_progress)
        self.texts = {d.id: d.joined(self.separator) for d in documents}

    def search(self, model: Any, queries: Sequence[str], k: int) -> list[list[Hit]]:
        from sbert.search.base import Hit as IndexHit
        from sbert.search.rerank import rerank

        found = self.first.search(model, queries, max(k, self.candidates))
        out = []
        for query, hits in zip(queries, found, strict=True):
            candidates = [IndexHit(h[0], h[1], self.texts[h[0]], n) for n, h in enumerate(hits)]
            out.append([(h.id, h.score) for h in rerank(self.cross_encoder, query, candidates, k, self.batch_size)])
        return out


@dataclass(frozen=True)
class RetrievalSettings:
    """How to retrieve, as ``sbert eval`` options say it: documents whole (cut at the model's limit) or in
    windows (``chunk``: ``mode``, ``window``, ``overlap``, at most ``max_windows`` per document: None for all),
    and BM25 beside them (``hybrid``: ``fusion``,
    ``alpha``) or alone (``lexical``); then, with ``rerank``, a cross-encoder re-scores the best
    ``candidates`` (also the results each side gives a hybrid fusion, as in ``sbert search``).
    ``retriever()`` makes a fresh retriever for one evaluation."""

    chunk: bool = False
    mode: str | None = None
    window: int | None = None
    overlap: int | None = None
    max_windows: int | None = MAX_WINDOWS
    hybrid: bool = False
    fusion: str | None = None
    alpha: float | None = None
    lexical: bool = False
    batch_size: int = 32
    rerank: Any = None  # a cross-encoder (a one-label PairScorer, or its folder) re-scoring the candidates
    candidates: int | None = None  # with rerank: how many of the first stage's (default 100)
    auto: bool = False  # choose chunk/hybrid/fusion/alpha on pseudo-queries from the corpus (sbert.search.auto)
    auto_queries: int = AUTO_QUERIES
    auto_kind: str = AUTO_KIND  # the pseudo-queries' kind (sbert.search.auto.KINDS)

    def __post_init__(self) -> None:
        if self.auto and (self.chunk or self.hybrid or self.lexical or self.fusion or self.alpha is not None):
            raise ValueError("auto chooses chunking and hybrid search itself: give neither with it")
        if self.candidates is not None and self.rerank is None:
            raise ValueError("candidates apply to re-ranking: give a cross-encoder (rerank) too")
        if self.lexical and (self.chunk or self.hybrid):
            raise ValueError("BM25 alone (lexical) takes neither chunking nor hybrid fusion")
        if not self.chunk and (self.mode or self.window or self.overlap is not None):
            raise ValueError("mode, window and overlap apply to documents in windows: ask for chunking too")
        if not (self.chunk or self.auto) and self.max_windows != MAX_WINDOWS:
            raise ValueError("max_windows applies to documents in windows: ask for chunking (or auto) too")
        if not self.hybrid and (self.fusion or self.alpha is not None):
            raise ValueError("fusion and alpha apply to hybrid search: ask for it too")
        from sbert.search.fusion import FUSIONS

        if self.fusion is not None and self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {self.fusion!r}")

    def retriever(self, location: str | Path | None = None) -> Retriever:
        """A fresh retriever: ``IndexRetriever`` (its index in memory, or at ``location``), or BM25 alone."""
        if self.auto:
            return AutoRetriever(self, location)
        if not self.lexical:
            return IndexRetriever(self, location)
        first = LexicalRetriever()
        if self.rerank is None:
            return first
        return RerankRetriever(first, self.cross_encoder(), self.candidates or 100, self.batch_size)

    def chunking(self) -> Any:
        """The ``sbert.windows.Chunking`` of ``chunk`` (None: documents whole)."""
        if not self.chunk:
            return None
        from sbert.windows import Chunking

        return Chunking(self.window, self.overlap, self.mode or Chunking.mode, max_windows=self.max_windows)

    def search_options(self, k: int, cross_encoder: Any = None) -> Any:
        """The ``sbert.search.retrieve.SearchOptions`` of these settings for the best ``k``."""
        from sbert.search.fusion import CANDIDATES
        from sbert.search.retrieve import SearchOptions

        return SearchOptions(
            k=k, mode=self.mode if self.chunk else None, hybrid=self.hybrid, fusion=self.fusion, alpha=self.alpha,
            rerank=cross_encoder, candidates=self.candidates or CANDIDATES,
        )  # fmt: skip

    def with_hybrid(self, fusion: str | None = None, alpha: float | None = None) -> RetrievalSettings:
        return replace(self, hybrid=True, fusion=fusion, alpha=alpha)

    def cross_encoder(self) -> Any:
        """``rerank`` as a cross-encoder (loaded once per call from a folder)."""
        from sbert.search.searcher import load_reranker

        return load_reranker(self.rerank)


def _hits(found: TopK, ids: Sequence[str]) -> list[list[Hit]]:
    return [
        [(ids[int(r)], float(s)) for s, r in zip(scores, rows, strict=True) if r >= 0]
        for scores, rows in zip(found.scores, found.indices, strict=True)
    ]


class AutoRetriever:
    """``sbert eval --auto``: at ``index``, the way of searching is chosen on pseudo-queries held out from
    the documents (``sbert.search.auto.choose_search``; never the judged queries), then the documents are
    indexed and searched that way by an ``IndexRetriever``. ``result`` keeps the choice and its evidence."""

    def __init__(self, settings: RetrievalSettings, location: str | Path | None = None) -> None:
        self.settings, self.location = settings, location
        self.result: Any = None
        self.chosen: IndexRetriever | None = None

    def index(self, model: Any, documents: Sequence[Document], show_progress: bool | None = None) -> None:
        import sys
        from dataclasses import replace

        from sbert.search.auto import choose_search, reusing_vectors

        name = getattr(model, "name_or_path", None) or "model"
        with reusing_vectors(model):  # the index after the choice: only the held-out documents are new to it
            if documents:  # what choosing embeds, and roughly how long it takes here: before it starts
                from sbert.windows import Chunking

                plan = Chunking().plan(model, [d.joined() for d in documents], batch_size=self.settings.batch_size)
                print(f"auto: to choose, {plan.summary(whole_too=True)}", file=sys.stderr)
            self.result = choose_search(
                model, documents, model=name, queries=self.settings.auto_queries, kind=self.settings.auto_kind,
                show_progress=show_progress,
            )  # fmt: skip
            choice = self.result.choice
            hybrid = {"fusion": choice.fusion, "alpha": choice.alpha} if choice.hybrid else {}
            settings = replace(self.settings, auto=False, chunk=choice.chunk, hybrid=choice.hybrid, **hybrid)
            self.chosen = IndexRetriever(settings, self.location)
            print(self.result.summary(), file=sys.stderr)  # what eval measures next: the user should see it
            self.chosen.index(model, documents, show_progress)

    def search(self, model: Any, queries: Sequence[str], k: int) -> list[list[Any]]:
        if self.chosen is None:
            raise RuntimeError("AutoRetriever.search before index: index the documents first")
        return self.chosen.search(model, queries, k)
