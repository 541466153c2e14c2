"""Duplicate and non-duplicate pairs drawn from a BEIR collection, for pair classification.

Positives: judged (query, relevant document) pairs. Negatives: for each drawn query, documents not
judged relevant to it: the best-ranked ones when a ``ranker`` is given (hard non-duplicates: what a
search would show first), random ones otherwise. The draw is a function of ``seed``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from sbert.data.beir import RetrievalCollection

# queries -> for each, document ids best first (e.g. BM25 or a dense search over the collection)
Ranker = Callable[[Sequence[str]], list[list[str]]]


def classification_pairs(
    collection: RetrievalCollection,
    seed: int = 0,
    max_queries: int | None = None,
    negatives_per_query: int = 1,
    ranker: Ranker | None = None,
) -> tuple[list[tuple[str, str]], list[int]]:
    """(pairs of texts, labels 1/0): every relevant document of up to ``max_queries`` queries (drawn by
    ``seed``) as a duplicate, and ``negatives_per_query`` non-relevant documents of each as non-duplicates."""
    if negatives_per_query < 0:
        raise ValueError(f"negatives_per_query must be 0 or more, got {negatives_per_query}")
    rng = random.Random(seed)
    queries = _drawn(collection, rng, max_queries)
    texts = collection.document_texts()
    ranked = ranker([collection.queries[q] for q in queries]) if ranker is not None else None
    doc_ids = list(texts)
    pairs, labels = [], []
    for i, q in enumerate(queries):
        relevant = collection.relevant(q)
        for doc in sorted(relevant):
            pairs.append((collection.queries[q], texts[doc]))
            labels.append(1)
        if ranked is not None:
            others = [d for d in ranked[i] if d not in relevant and d in texts][:negatives_per_query]
        else:
            others = _random_others(rng, doc_ids, relevant, negatives_per_query)
        for doc in others:
            pairs.append((collection.queries[q], texts[doc]))
            labels.append(0)
    return pairs, labels


def drawn_queries(collection: RetrievalCollection, seed: int = 0, max_queries: int | None = None) -> list[str]:
    """The ids of the queries ``classification_pairs`` draws with the same ``seed`` and ``max_queries``, in
    its order: those with a relevant document, shuffled, the first ``max_queries``."""
    return _drawn(collection, random.Random(seed), max_queries)


def _drawn(collection: RetrievalCollection, rng: random.Random, max_queries: int | None) -> list[str]:
    queries = sorted(q for q in collection.queries if collection.relevant(q))
    if not queries:
        raise ValueError(f"{collection.name}: no query has a relevant document to make duplicate pairs of")
    rng.shuffle(queries)
    return queries[:max_queries] if max_queries is not None else queries


def _random_others(rng: random.Random, doc_ids: list[str], relevant: set[str], k: int) -> list[str]:
    """Up to ``k`` distinct documents outside ``relevant``, drawn by ``rng``."""
    chosen: list[str] = []
    candidates = len(doc_ids) - len(relevant)
    while len(chosen) < min(k, candidates):
        doc = doc_ids[rng.randrange(len(doc_ids))]
        if doc not in relevant and doc not in chosen:
            chosen.append(doc)
    return chosen
