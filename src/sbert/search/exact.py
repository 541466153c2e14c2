"""Exact top-k search in chunks: memory is bounded by ``query_chunk_size x corpus_chunk_size`` scores.

Scores are first computed in float32 blocks (matrix products), whose last bits depend on the block
shapes and the processor. The candidates (each query's best ``k``, plus every row within a small band
of the ``k``-th score: ``ranking.band``) are then re-scored pair by pair in float64 (``pair_scores``),
and the result is cut by (score descending, corpus index ascending: ``ranking.top``). So a pair's
score does not depend on chunk sizes, equal vectors get equal scores and are ordered by index, and only
rows whose true scores are within float32 rounding of the cut could change with chunking or processor.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from sbert.arrays import Array, as_tensor
from sbert.search import ranking

if TYPE_CHECKING:
    import torch

SCORES = ("cosine", "dot", "euclidean", "manhattan")  # sbert.similarity.MATRIX's names

_RESCORE_BLOCK = 2**22  # float64 values gathered at a time when re-scoring


class TopK(NamedTuple):
    """Per query, the best ``k`` corpus rows: ``scores`` (n, k) float32 best first, ``indices`` (n, k) int64.

    Equal scores are ordered by corpus index, lowest first.
    """

    scores: np.ndarray
    indices: np.ndarray


def pair_scores(a: np.ndarray, b: np.ndarray, score: str) -> np.ndarray:
    """``score`` of ``a[i]`` (n, d) with ``b[i]`` (n, d), or with each of ``b[i, j]`` (n, w, d), summed in
    float64 pair by pair: a pair's score depends only on its two vectors, not on what is computed beside it."""
    pairs = b.ndim == 2
    if score in ("dot", "cosine"):
        out: np.ndarray = np.einsum("nd,nd->n" if pairs else "nd,nwd->nw", a, b, dtype=np.float64)
        if score == "cosine":
            norm_a = np.maximum(np.sqrt(np.einsum("nd,nd->n", a, a, dtype=np.float64)), 1e-12)
            norm_b = np.maximum(np.sqrt(np.einsum("...d,...d->...", b, b, dtype=np.float64)), 1e-12)
            out = out / (norm_a if pairs else norm_a[:, None]) / norm_b
        return out
    diff: np.ndarray = (a if pairs else a[:, None, :]).astype(np.float64) - b
    if score == "euclidean":
        squared: np.ndarray = np.einsum("...d,...d->...", diff, diff)
        return np.asarray(-np.sqrt(squared))
    if score == "manhattan":
        return np.asarray(-np.abs(diff).sum(-1))
    raise ValueError(f"unknown similarity {score!r}; expected one of {', '.join(SCORES)}")


def _numpy(x: torch.Tensor) -> np.ndarray:
    import torch

    return (x if x.dtype in (torch.float32, torch.float64) else x.float()).detach().cpu().numpy()


def _rows(corpus: torch.Tensor, indices: np.ndarray) -> np.ndarray:
    """Corpus rows ``indices`` (any shape) as numpy, shape (*indices.shape, d)."""
    import torch

    if corpus.device.type == "cpu" and corpus.dtype in (torch.float32, torch.float64):
        rows: np.ndarray = corpus.numpy()[indices]
        return rows
    flat = torch.from_numpy(np.ascontiguousarray(indices).ravel()).to(corpus.device)
    return _numpy(corpus.index_select(0, flat)).reshape(*indices.shape, corpus.shape[1])


def _rescore(queries: torch.Tensor, corpus: torch.Tensor, indices: np.ndarray, score: str) -> np.ndarray:
    """float64 scores of each query with its candidate rows ``indices`` (n, w), a block of queries at a time."""
    out = np.empty(indices.shape, np.float64)
    block = max(1, _RESCORE_BLOCK // max(1, indices.shape[1] * corpus.shape[1]))
    for r0 in range(0, len(indices), block):
        q = _numpy(queries[r0 : r0 + block])
        out[r0 : r0 + block] = pair_scores(q, _rows(corpus, indices[r0 : r0 + block]), score)
    return out


def _band_top(scores: torch.Tensor, offset: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best ``k`` float32 scores of a block and every score in the band below the ``k``-th (as many
    columns as the widest row needs), with column indices + ``offset``."""
    import torch

    values, positions = torch.topk(scores, k, dim=1, largest=True, sorted=False)
    lowest = ranking.floor(values.min(dim=1, keepdim=True).values)
    width = int((scores >= torch.as_tensor(lowest)).sum(dim=1).max())
    if width > k:
        values, positions = torch.topk(scores, width, dim=1, largest=True, sorted=False)
    return values.float().cpu().numpy(), positions.cpu().numpy() + offset


def _chunk_top(scores: torch.Tensor, offset: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` float32 scores of each row of a block, ties at the cut broken by lowest index."""
    import torch

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
    return ranking.top(s, i, k)


def semantic_search(
    query_emb: Array,
    corpus_emb: Array,
    top_k: int = 10,
    *,
    score: str = "cosine",
    query_chunk_size: int = 100,
    corpus_chunk_size: int = 500_000,
    exact_scores: bool = True,
) -> TopK:
    """Exact top-k corpus rows for each query by ``score`` (cosine, dot, euclidean, manhattan; higher = closer).

    ``query_emb`` (n, d) and ``corpus_emb`` (m, d): numpy or torch (the work runs on the corpus's device).
    Returns ``TopK`` with k = min(top_k, m), ordered by (score desc, corpus index asc). With
    ``exact_scores`` (default) the candidates are re-scored in float64 (see the module's docstring), so
    scores and order do not depend on the chunk sizes; without it, scores are the float32 block products
    and may differ in the last bits between chunk sizes and processors, and rows that close may swap.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if query_chunk_size < 1 or corpus_chunk_size < 1:
        raise ValueError("chunk sizes must be at least 1")
    if _without_torch(query_emb, corpus_emb, score, exact_scores):  # numpy only: same rows, same scores
        query_emb, corpus_emb = cast(np.ndarray, query_emb), cast(np.ndarray, corpus_emb)  # both checked numpy
        return _numpy_search(query_emb, corpus_emb, top_k, query_chunk_size, corpus_chunk_size)
    torch, similarity = _torch_modules()
    fn = similarity.get(score)
    queries, corpus = as_tensor(query_emb), as_tensor(corpus_emb)
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(f"query width {queries.shape[1]} differs from corpus width {corpus.shape[1]}")
    queries = queries.to(corpus.device, corpus.dtype)
    raw_queries = queries
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
                block, kc = fn(q, c), min(k, c.shape[0])
                reduce = ranking.band if exact_scores else ranking.top
                s, i = _band_top(block, c0, kc) if exact_scores else _chunk_top(block, c0, kc)
                best_s, best_i = reduce(np.hstack([best_s, s]), np.hstack([best_i, i]), k)
            if exact_scores:  # the candidates, re-scored pair by pair, then cut
                exact = _rescore(raw_queries[q0 : q0 + query_chunk_size], corpus, best_i, score)
                best_s, best_i = ranking.top(exact, best_i, k)
            out_s.append(best_s)
            out_i.append(best_i)
    return TopK(np.vstack(out_s).astype(np.float32), np.vstack(out_i).astype(np.int64))


def _torch_modules() -> tuple[ModuleType, ModuleType]:
    import torch

    from sbert import similarity

    return torch, similarity


def _without_torch(query_emb: Array, corpus_emb: Array, score: str, exact_scores: bool) -> bool:
    """Whether ``semantic_search`` runs in numpy: dot products of numpy arrays, with torch not yet imported
    (the light query path of ``sbert search``); the candidates are re-scored in float64 either way, so both
    paths return the same rows and scores."""
    return (
        "torch" not in sys.modules
        and score == "dot"
        and exact_scores
        and isinstance(query_emb, np.ndarray)
        and isinstance(corpus_emb, np.ndarray)
        and query_emb.ndim == corpus_emb.ndim == 2
        and np.issubdtype(corpus_emb.dtype, np.floating)
    )


def _numpy_search(queries: np.ndarray, corpus: np.ndarray, top_k: int, q_chunk: int, c_chunk: int) -> TopK:
    """``semantic_search`` by dot product in numpy: float32 blocks, the band below each cut, float64 re-scoring."""
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(f"query width {queries.shape[1]} differs from corpus width {corpus.shape[1]}")
    queries = queries.astype(corpus.dtype, copy=False)
    n, m = queries.shape[0], corpus.shape[0]
    k = min(top_k, m)
    if n == 0 or m == 0:
        return TopK(np.zeros((n, k), np.float32), np.zeros((n, k), np.int64))
    out_s, out_i = [], []
    for q0 in range(0, n, q_chunk):
        q = queries[q0 : q0 + q_chunk]
        best_s = np.empty((q.shape[0], 0), np.float32)
        best_i = np.empty((q.shape[0], 0), np.int64)
        for c0 in range(0, m, c_chunk):
            block = (q @ corpus[c0 : c0 + c_chunk].T).astype(np.float32, copy=False)
            kc = min(k, block.shape[1])
            cut = -np.partition(-block, kc - 1, axis=1)[:, kc - 1 : kc]  # each row's kc-th best
            inside = block >= ranking.floor(cut)
            width = int(inside.sum(axis=1).max())
            pick = (
                np.argpartition(-block, width - 1, axis=1)[:, :width]
                if width < block.shape[1]
                else np.broadcast_to(np.arange(block.shape[1]), block.shape)
            )
            s = np.take_along_axis(block, pick, 1)
            best_s, best_i = ranking.band(np.hstack([best_s, s]), np.hstack([best_i, pick + c0]), k)
        exact = pair_scores(q, corpus[best_i], "dot")
        best_s, best_i = ranking.top(exact, best_i, k)
        out_s.append(best_s)
        out_i.append(best_i)
    return TopK(np.vstack(out_s).astype(np.float32), np.vstack(out_i).astype(np.int64))
