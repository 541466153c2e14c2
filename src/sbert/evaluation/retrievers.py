"""Retrievers for ``RetrievalEvaluator`` beside the default ``DenseRetriever``: long documents in windows,
BM25 alone, and dense fused with BM25.

Each follows ``sbert.evaluation.retrieval.Retriever``: ``index(model, documents)`` once, then
``search(model, queries, k)`` -> per query ``(document id, score)`` best first. Documents are
``Document.joined`` (title + " " + text); documents are kept in id order, so equal scores rank by id.

- ``ChunkedRetriever``: every document in token windows (``sbert.documents.encode_documents``), scored
  by its best window (``maxp``) or by the mean of its windows (``mean``).
- ``LexicalRetriever``: BM25 (``sbert.search.lexical``); the model is not used.
- ``HybridRetriever``: a dense retriever's and BM25's top ``candidates`` fused (``sbert.search.fusion``:
  reciprocal rank fusion, or a weighted sum of min-max normalised scores).
- ``RerankRetriever``: any of these retrieves ``candidates``, a cross-encoder re-scores them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sbert.data.beir import Document
from sbert.evaluation.retrieval import DenseRetriever, Hit, Retriever
from sbert.search.exact import TopK


def _ordered(documents: Sequence[Document], separator: str) -> tuple[list[str], list[str]]:
    ordered = sorted(documents, key=lambda d: d.id)
    return [d.id for d in ordered], [d.joined(separator) for d in ordered]


class ChunkedRetriever:
    """Documents embedded window by window (``window`` tokens, ``overlap`` shared; default: the model's
    limit and ``sbert.documents.DEFAULT_OVERLAP``), scored by ``mode``: ``maxp`` or ``mean``."""

    def __init__(
        self,
        mode: str | None = None,
        window: int | None = None,
        overlap: int | None = None,
        batch_size: int = 32,
        separator: str = " ",
    ) -> None:
        from sbert import documents

        self.mode = documents.check_mode(mode or documents.DEFAULT_MODE)
        self.window, self.overlap = window, documents.DEFAULT_OVERLAP if overlap is None else overlap
        self.batch_size, self.separator = batch_size, separator
        self.ids: list[str] = []
        self.encoded: Any = None

    def index(self, model: Any, documents: Sequence[Document], show_progress: bool | None = None) -> None:
        from sbert.documents import encode_documents

        self.ids, texts = _ordered(documents, self.separator)
        self.encoded = encode_documents(
            model,
            texts,
            window=self.window,
            overlap=self.overlap,
            batch_size=self.batch_size,
            show_progress=show_progress,
        )

    def scored_by(self, mode: str) -> ChunkedRetriever:
        """The same windows (no second embedding), documents scored by ``mode`` instead."""
        from copy import copy

        from sbert.documents import check_mode

        other = copy(self)
        other.mode = check_mode(mode)
        return other

    def search(self, model: Any, queries: Sequence[str], k: int) -> list[list[Hit]]:
        from sbert.documents import rank_documents

        if self.encoded is None:
            raise RuntimeError("ChunkedRetriever.search before index: index the documents first")
        vectors = model.encode_query(list(queries), batch_size=self.batch_size, on_truncation="ignore")
        found = rank_documents(vectors, self.encoded, min(k, len(self.ids)), self.mode)
        return [[(self.ids[hit.document], hit.score) for hit in row] for row in found]


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
    """A dense retriever (default ``DenseRetriever``; or ``ChunkedRetriever``) fused with BM25: each side's
    best ``candidates`` per query, then ``fusion`` (``rrf``, or ``weighted`` with the dense side's weight
    ``alpha``; default and meaning as in ``sbert.search.fusion``)."""

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
        self.dense, self.lexical = dense or DenseRetriever(), lexical or LexicalRetriever()
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

        wide = max(k, self.candidates)
        sides = [self._top(retriever.search(model, queries, wide), wide) for retriever in (self.dense, self.lexical)]
        return _hits(fuse(*sides, k, fusion=self.fusion, alpha=self.alpha), self.ids)

    def _top(self, hits: list[list[Hit]], width: int) -> TopK:
        """Hits as a ``TopK`` over this retriever's rows (padded with row -1, score -inf)."""
        scores = np.full((len(hits), width), -np.inf, dtype=np.float32)
        rows = np.full((len(hits), width), -1, dtype=np.int64)
        for n, row in enumerate(hits):
            rows[n, : len(row)] = [self.row_of[doc] for doc, _ in row]
            scores[n, : len(row)] = [score for _, score in row]
        return TopK(scores, rows)


class RerankRetriever:
    """``first`` (any retriever) finds each query's best ``candidates`` documents; ``cross_encoder`` (a
    one-label ``PairScorer``) scores (query, document) and the best ``k`` by its score are returned."""

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
        from sbert.search.ranking import order

        found = self.first.search(model, queries, max(k, self.candidates))
        out = []
        for query, hits in zip(queries, found, strict=True):
            pairs = [(query, self.texts[doc]) for doc, _ in hits]
            scores = self.cross_encoder.predict(pairs, batch_size=self.batch_size) if pairs else np.zeros(0)
            if scores.ndim != 1:
                raise ValueError("re-ranking needs a one-label cross-encoder")
            ids = np.array([doc for doc, _ in hits])
            out.append([(str(ids[i]), float(scores[i])) for i in order(scores, ids)[:k]])
        return out


@dataclass(frozen=True)
class RetrievalSettings:
    """How to retrieve, as ``sbert eval`` options say it: documents whole (cut at the model's limit) or in
    windows (``chunk``: ``mode``, ``window``, ``overlap``), and BM25 beside them (``hybrid``: ``fusion``,
    ``alpha``) or alone (``lexical``); then, with ``rerank``, a cross-encoder re-scores the best
    ``candidates``. ``retriever()`` makes a fresh retriever for one evaluation."""

    chunk: bool = False
    mode: str | None = None
    window: int | None = None
    overlap: int | None = None
    hybrid: bool = False
    fusion: str | None = None
    alpha: float | None = None
    lexical: bool = False
    batch_size: int = 32
    rerank: Any = None  # a cross-encoder (a one-label PairScorer, or its folder) re-scoring the candidates
    candidates: int | None = None  # with rerank: how many of the first stage's (default 100)

    def __post_init__(self) -> None:
        if self.candidates is not None and self.rerank is None:
            raise ValueError("candidates apply to re-ranking: give a cross-encoder (rerank) too")
        if self.lexical and (self.chunk or self.hybrid):
            raise ValueError("BM25 alone (lexical) takes neither chunking nor hybrid fusion")
        if not self.chunk and (self.mode or self.window or self.overlap is not None):
            raise ValueError("mode, window and overlap apply to documents in windows: ask for chunking too")
        if not self.hybrid and (self.fusion or self.alpha is not None):
            raise ValueError("fusion and alpha apply to hybrid search: ask for it too")

    def retriever(self) -> Retriever:
        if self.lexical:
            return self._reranked(LexicalRetriever())
        dense: Retriever = (
            ChunkedRetriever(self.mode, self.window, self.overlap, self.batch_size)
            if self.chunk
            else DenseRetriever(self.batch_size)
        )
        first = HybridRetriever(dense, self.fusion, self.alpha) if self.hybrid else dense
        return self._reranked(first)

    def _reranked(self, first: Retriever) -> Retriever:
        if self.rerank is None:
            return first
        scorer = self.rerank
        if isinstance(scorer, (str, Path)):
            from sbert.cross_encoder import CrossEncoder

            scorer = CrossEncoder.load(scorer)
        return RerankRetriever(first, scorer, self.candidates or 100, self.batch_size)


def _hits(found: TopK, ids: Sequence[str]) -> list[list[Hit]]:
    return [
        [(ids[int(r)], float(s)) for s, r in zip(scores, rows, strict=True) if r >= 0]
        for scores, rows in zip(found.scores, found.indices, strict=True)
    ]
