"""Exact top-k search in chunks: memory is bounded by ``query_chunk_size x corpus_chunk_size`` scores."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import torch

from sbert import similarity
from sbert.similarity import Array


class TopK(NamedTuple):
    """Per query, the best ``k`` corpus rows: ``scores`` (n, k) float32 best first, ``indices`` (n, k) int64.

    Ties in score are ordered by corpus index, lowest first, so results do not depend on chunking.
    """

    scores: np.ndarray
    indices: np.ndarray


def as_tensor(x: Array) -> torch.Tensor:
    """(n, d) floating tensor from numpy or torch; a single (d,) vector becomes one row."""
    if isinstance(x, torch.Tensor):
        t = x
    else:
        with warnings.catch_warnings():  # read-only arrays (memory-mapped indexes) are only ever read here
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            t = torch.from_numpy(np.asarray(x))
    if t.ndim == 1:
        t = t.unsqueeze(0)
    if t.ndim != 2:
        raise ValueError(f"expected embeddings of shape (n, d) or (d,), got shape {tuple(t.shape)}")
    return t if t.is_floating_point() else t.float()


def _ordered(scores: np.ndarray, indices: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of candidates reduced to their best ``k`` by (score desc, index asc)."""
    order = np.lexsort((indices, -scores), axis=-1)[:, :k]
    return np.take_along_axis(scores, order, 1), np.take_along_axis(indices, order, 1)


def _chunk_top(scores: torch.Tensor, offset: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of each row of a score block, ties included at the cut, ordered (score desc, index asc)."""
    values, positions = torch.topk(scores, k, dim=1, largest=True, sorted=True)
    kth = values[:, -1:]
    at_cut = (scores == kth).sum(dim=1)
    inside = (values == kth).sum(dim=1)
    s, i = values.float().cpu().numpy(), positions.cpu().numpy() + offset
    for row in torch.nonzero(at_cut > inside).flatten().tolist():
        # More rows tie at the cut than topk kept: take the lowest indices among them.
        ties = torch.nonzero(scores[row] == kth[row]).flatten()[: int(inside[row])].cpu().numpy() + offset
        keep = s[row] > s[row, -1]
        n = int(keep.sum())
        i[row, n:] = np.sort(ties)
        s[row, :n], i[row, :n] = s[row, keep], i[row, keep]
    return _ordered(s, i, k)


def semantic_search(
    query_emb: Array,
    corpus_emb: Array,
    top_k: int = 10,
    *,
    score: str = "cosine",
    query_chunk_size: int = 100,
    corpus_chunk_size: int = 500_000,
) -> TopK:
    """Exact top-k corpus rows for each query by ``score`` (cosine, dot, euclidean, manhattan; higher = closer).

    ``query_emb`` (n, d) and ``corpus_emb`` (m, d): numpy or torch (the work runs on the corpus's device).
    Returns ``TopK`` with k = min(top_k, m); equal to a full sort of the (n, m) score matrix.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if query_chunk_size < 1 or corpus_chunk_size < 1:
        raise ValueError("chunk sizes must be at least 1")
    fn = similarity.get(score)
    queries, corpus = as_tensor(query_emb), as_tensor(corpus_emb)
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(f"query width {queries.shape[1]} differs from corpus width {corpus.shape[1]}")
    queries = queries.to(corpus.device, corpus.dtype)
    n, m = queries.shape[0], corpus.shape[0]
    k = min(top_k, m)
    if n == 0 or m == 0:
        return TopK(np.zeros((n, k), np.float32), np.zeros((n, k), np.int64))
    if score == "cosine":  # normalise once instead of once per chunk pair
        queries = torch.nn.functional.normalize(queries, dim=1)
        fn = similarity.get("dot")
    out_s, out_i = [], []
    with torch.inference_mode():
        for q0 in range(0, n, query_chunk_size):
            q = queries[q0 : q0 + query_chunk_size]
            best_s = np.empty((q.shape[0], 0), np.float32)
            best_i = np.empty((q.shape[0], 0), np.int64)
            for c0 in range(0, m, corpus_chunk_size):
                c = corpus[c0 : c0 + corpus_chunk_size]
                if score == "cosine":
                    c = torch.nn.functional.normalize(c, dim=1)
                s, i = _chunk_top(fn(q, c), c0, min(k, c.shape[0]))
                best_s, best_i = _ordered(np.hstack([best_s, s]), np.hstack([best_i, i]), k)
            out_s.append(best_s)
            out_i.append(best_i)
    return TopK(np.vstack(out_s).astype(np.float32), np.vstack(out_i).astype(np.int64))
