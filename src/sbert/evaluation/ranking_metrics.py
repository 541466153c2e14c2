"""One query's ranking against its relevant documents: accuracy, precision, recall, MRR, NDCG and MAP at k.

Each function takes the ranking (document ids, best first) and the relevant ids, and returns a fraction in
[0, 1], computed as sentence-transformers' ``InformationRetrievalEvaluator`` computes it: relevance is
binary, NDCG's ideal ranking has ``min(k, #relevant)`` relevant documents, MAP@k divides by
``min(k, #relevant)``, recall@k by ``#relevant``, precision@k by ``k``. ``RetrievalEvaluator``
(``sbert.evaluation.retrieval``) and ``sbert index build --auto`` (``sbert.search.auto``) both score with
these; this module imports nothing of sbert, so either may.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence

__all__ = ["METRICS", "accuracy_at_k", "map_at_k", "mrr_at_k", "ndcg_at_k", "precision_at_k", "recall_at_k"]


def _hits(ranked: Sequence[str], relevant: Collection[str], k: int) -> list[int]:
    """1 or 0 per entry of the top ``k``: relevant or not."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return [1 if doc in relevant else 0 for doc in ranked[:k]]


def accuracy_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1 if a relevant document is in the top ``k``, else 0."""
    return float(any(_hits(ranked, relevant, k)))


def precision_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Relevant documents in the top ``k``, divided by ``k`` (even when fewer were ranked)."""
    return sum(_hits(ranked, relevant, k)) / k


def recall_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Relevant documents in the top ``k``, divided by the number of relevant documents."""
    return sum(_hits(ranked, relevant, k)) / len(relevant)


def mrr_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1 / rank of the first relevant document in the top ``k`` (ranks from 1), 0 if there is none."""
    hits = _hits(ranked, relevant, k)
    return 1.0 / (hits.index(1) + 1) if 1 in hits else 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """DCG of the top ``k`` (gain 1 per relevant document, discount log2(rank + 1)) over the DCG of an
    ideal ranking, which puts ``min(k, #relevant)`` relevant documents first."""
    dcg = sum(hit / math.log2(rank + 2) for rank, hit in enumerate(_hits(ranked, relevant, k)))
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(k, len(relevant))))
    return dcg / ideal


def map_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Average precision at k: the sum of precision@rank over the ranks of relevant documents in the top
    ``k``, divided by ``min(k, #relevant)``."""
    found, total = 0, 0.0
    for rank, hit in enumerate(_hits(ranked, relevant, k), start=1):
        if hit:
            found += 1
            total += found / rank
    return total / min(k, len(relevant))


METRICS: dict[str, Callable[[Sequence[str], Collection[str], int], float]] = {
    "accuracy": accuracy_at_k,
    "precision": precision_at_k,
    "recall": recall_at_k,
    "mrr": mrr_at_k,
    "ndcg": ndcg_at_k,
    "map": map_at_k,
}
