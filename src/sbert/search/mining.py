"""Paraphrase mining: the most similar pairs among many texts, without an N x N matrix in memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from sbert.arrays import Array, as_tensor
from sbert.search import ranking
from sbert.search.exact import TopK, semantic_search

if TYPE_CHECKING:
    from sbert.protocols import TextEncoder


class Pair(NamedTuple):
    """A mined pair: ``score`` and the two row numbers, ``i < j``."""

    score: float
    i: int
    j: int


Candidates = tuple[np.ndarray, np.ndarray, np.ndarray]  # scores, i, j: one pair per position, i < j


def _reduce(parts: list[Candidates], limit: int) -> Candidates:
    """Distinct pairs (i < j), best first by (score desc, i, j), at most ``limit``; a pair seen twice keeps its best."""
    s, a, b = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = ranking.order(s, a, b)
    s, a, b = s[order], a[order], b[order]
    _, first = np.unique(a.astype(np.int64) * (int(b.max(initial=0)) + 1) + b, return_index=True)
    keep = np.sort(first)[:limit]  # first occurrence = best score for that pair, order preserved
    return s[keep], a[keep], b[keep]


def _partners(found: TopK, q0: int, top_k: int, threshold: float | None) -> Candidates:
    """Each query row's ``top_k`` partners in ``found`` (rows ``q0``, ``q0 + 1``, ... of the corpus) as pairs."""
    rows = np.arange(q0, q0 + found.indices.shape[0])[:, None]
    other = found.indices != rows
    # Keep top_k partners per row: drop the row itself, or the last one when the row was not listed.
    other &= np.cumsum(other, axis=1) <= top_k
    if threshold is not None:
        other &= found.scores >= threshold
    i = np.broadcast_to(rows, other.shape)[other]
    j = found.indices[other]
    return found.scores[other], np.minimum(i, j), np.maximum(i, j)


def paraphrase_mining(
    texts_or_embeddings: Sequence[str] | Array,
    encoder: TextEncoder | None = None,
    *,
    top_k: int = 100,
    max_pairs: int = 500_000,
    threshold: float | None = None,
    score: str = "cosine",
    query_chunk_size: int = 1000,
    corpus_chunk_size: int = 100_000,
    batch_size: int = 32,
    show_progress: bool | None = None,
    exact_scores: bool = False,
) -> list[Pair]:
    """The most similar pairs: for each row its ``top_k`` best partners, merged, best ``max_pairs`` kept.

    Give texts with an ``encoder``, or (n, d) embeddings. Pairs scoring below ``threshold`` are
    dropped. Memory holds at most ``query_chunk_size x corpus_chunk_size`` scores plus ~2 x max_pairs
    candidates. Pairs come ordered by score descending, then ``i``, then ``j``, and the same call gives
    the same list. Scores are float32 matrix products: between chunk sizes or processors a pair's score
    can differ in the last bits, so pairs (or partners at a row's ``top_k`` cut) whose scores are that
    close can change places. ``exact_scores`` re-scores each row's candidates pair by pair in float64
    (see ``semantic_search``): scores and order then do not depend on chunk sizes, and equal vectors
    tie exactly, for about 1.8x the mining time.
    """
    if top_k < 1 or max_pairs < 1:
        raise ValueError(f"top_k and max_pairs must be at least 1, got {top_k} and {max_pairs}")
    if isinstance(texts_or_embeddings, Sequence) and not isinstance(texts_or_embeddings, np.ndarray):
        if encoder is None:
            raise ValueError("paraphrase_mining was given texts but no encoder to embed them")
        emb = encoder.encode(list(texts_or_embeddings), batch_size=batch_size, show_progress=show_progress)
    else:
        emb = texts_or_embeddings
    corpus = as_tensor(emb)
    if score == "cosine" and not exact_scores:  # normalise once, not once per query chunk
        corpus, score = torch.nn.functional.normalize(corpus, dim=1), "dot"
    chunks = {"query_chunk_size": query_chunk_size, "corpus_chunk_size": corpus_chunk_size}
    parts: list[Candidates] = [(np.empty(0, np.float32), np.empty(0, np.int64), np.empty(0, np.int64))]
    pending = 0  # candidates found since the last reduction
    for q0 in range(0, corpus.shape[0], query_chunk_size):
        query = corpus[q0 : q0 + query_chunk_size]
        found = semantic_search(query, corpus, top_k + 1, score=score, exact_scores=exact_scores, **chunks)
        parts.append(_partners(found, q0, top_k, threshold))
        pending += len(parts[-1][0])
        if pending > 2 * max_pairs:
            parts, pending = [_reduce(parts, max_pairs)], 0
    s, a, b = _reduce(parts, max_pairs)
    return [Pair(float(x), int(y), int(z)) for x, y, z in zip(s, a, b, strict=True)]
