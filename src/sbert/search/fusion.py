"""Hybrid search: dense (embedding) and lexical (BM25) results fused into one ranking.

Two ways, both per query over the candidates either side found (rows -1 mark padding):

* ``rrf``, reciprocal rank fusion: a row scores ``sum 1 / (rrf_k + rank)`` over the rankings it is in
  (rank 1 = best; ``rrf_k`` = 60, as Cormack et al. 2009). Only ranks count, so the two sides' scales
  never matter.
* ``weighted``: ``alpha x dense + (1 - alpha) x lexical``, each side's scores min-max normalised over
  its own candidates of that query (best -> 1, worst -> 0; a side whose candidates all score the same
  gives them 1). A row one side did not find gets 0 from it.

``weighted`` with ``alpha`` = 0.7 is the default: ``weighted`` beat ``rrf`` on both collections measured,
and the weight, chosen on openoffice-dups and reported on SciFact, which it never saw, is the one that
gained over dense search on both (a heavier BM25 share, SciFact's own best, lost to dense search on the bug
reports). Figures: benchmarks/results/README.md.
Fused results come best first by ``sbert.search.ranking`` (equal scores: lower row first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sbert.search import ranking
from sbert.search.exact import TopK, semantic_search

if TYPE_CHECKING:
    from sbert.search.lexical import BM25

FUSIONS = ("rrf", "weighted")
DEFAULT_FUSION = "weighted"  # above rrf on SciFact and openoffice-dups: benchmarks/results/adapt.md
RRF_K = 60
ALPHA = 0.7  # the dense side's weight in ``weighted`` (see above)
CANDIDATES = 100  # rows each side contributes per query in ``hybrid_search``


def reciprocal_rank_fusion(results: Sequence[TopK], k: int, rrf_k: int = RRF_K) -> TopK:
    """Rows ranked by the sum of ``1 / (rrf_k + rank)`` over ``results`` (each best first), best ``k`` first."""
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    rank_scores = [
        np.broadcast_to(1.0 / (rrf_k + np.arange(1, r.indices.shape[1] + 1)), r.indices.shape) for r in results
    ]
    return _combine([r.indices for r in results], rank_scores, k)


def minmax(scores: np.ndarray) -> np.ndarray:
    """Each row of (n, m) ``scores`` mapped to [0, 1] over its finite entries (best 1, worst 0; all equal: 1);
    -inf (padding) stays -inf."""
    finite = np.isfinite(scores)
    low = np.where(finite, scores, np.inf).min(axis=1, keepdims=True)
    high = np.where(finite, scores, -np.inf).max(axis=1, keepdims=True)
    spread = high - low
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.where(spread > 0, (scores - low) / np.where(spread > 0, spread, 1), 1.0)
    return np.where(finite, scaled, -np.inf)


def weighted_fusion(dense: TopK, lexical: TopK, k: int, alpha: float = ALPHA) -> TopK:
    """Rows ranked by ``alpha x minmax(dense) + (1 - alpha) x minmax(lexical)``, best ``k`` first."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be from 0 to 1, got {alpha}")
    sides = [_weighted(dense.scores, alpha), _weighted(lexical.scores, 1 - alpha)]
    return _combine([dense.indices, lexical.indices], sides, k)


def _weighted(scores: np.ndarray, weight: float) -> np.ndarray:
    scaled = minmax(scores.astype(np.float64))
    finite = np.isfinite(scaled)
    return np.where(finite, weight * np.where(finite, scaled, 0.0), -np.inf)


def fuse(
    dense: TopK, lexical: TopK, k: int, fusion: str = DEFAULT_FUSION, alpha: float = ALPHA, rrf_k: int = RRF_K
) -> TopK:
    """``dense`` and ``lexical`` results fused by ``fusion`` (``rrf`` or ``weighted``; see the module)."""
    if fusion == "rrf":
        return reciprocal_rank_fusion([dense, lexical], k, rrf_k)
    if fusion == "weighted":
        return weighted_fusion(dense, lexical, k, alpha)
    raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")


def _combine(rows: Sequence[np.ndarray], scores: Sequence[np.ndarray], k: int) -> TopK:
    """Per query, the sum of each row's ``scores`` over the lists it is in, best ``k`` first (padded; a ``k``
    beyond the lists' rows together is cut to them: no more distinct rows can come out)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = min(k, max(1, sum(r.shape[1] for r in rows)))
    n = len(rows[0])
    out_scores = np.full((n, k), -np.inf, dtype=np.float64)
    out_rows = np.full((n, k), -1, dtype=np.int64)
    for q in range(n):
        ids = np.concatenate([r[q] for r in rows]).astype(np.int64)
        values = np.concatenate([s[q] for s in scores]).astype(np.float64)
        keep = (ids >= 0) & np.isfinite(values)
        unique, inverse = np.unique(ids[keep], return_inverse=True)
        totals = np.bincount(inverse, weights=values[keep], minlength=len(unique))
        best_scores, best_rows = ranking.top(totals[None], unique[None], k)
        out_scores[q, : best_rows.shape[1]], out_rows[q, : best_rows.shape[1]] = best_scores[0], best_rows[0]
    return TopK(out_scores.astype(np.float32), out_rows)


def hybrid_search(
    queries: Sequence[str],
    query_vectors: np.ndarray,
    corpus_vectors: np.ndarray,
    bm25: BM25,
    k: int = 10,
    *,
    fusion: str = DEFAULT_FUSION,
    alpha: float = ALPHA,
    rrf_k: int = RRF_K,
    candidates: int = CANDIDATES,
) -> TopK:
    """Each query's best ``k`` corpus rows by dense (cosine) and BM25 search fused (see the module):
    ``candidates`` rows from each side, then ``fuse``. ``bm25`` row i is corpus row i."""
    if bm25.rows != len(corpus_vectors):
        raise ValueError(f"the BM25 index holds {bm25.rows} rows, the corpus {len(corpus_vectors)}")
    if len(queries) != len(query_vectors):
        raise ValueError(f"{len(queries)} queries but {len(query_vectors)} query vectors")
    wide = max(k, candidates)
    dense = semantic_search(query_vectors, corpus_vectors, wide)
    return fuse(dense, bm25.search(queries, wide), k, fusion, alpha, rrf_k)
