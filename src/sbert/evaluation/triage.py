"""Is this already reported? The threshold ``sbert search --threshold`` needs, chosen on judged duplicates.

Each query of a collection's split is paired with its relevant documents (duplicates) and with the
``negatives`` best-ranked documents it is not a duplicate of (what a search shows first: the hard cases),
ranked by the model through the index code ``sbert search`` runs. Every pair is scored as that search scores
a hit: the cosine of the query's ``encode_query`` vector and the document's ``encode_document`` vector. The
metrics are ``sbert.evaluation.pair_classification``'s (the threshold with the best F1, and the best
accuracy's), here x 100 like the other tasks of ``sbert eval``; thresholds stay cosines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sbert.data.beir import RetrievalCollection
from sbert.data.pairs_from_beir import classification_pairs
from sbert.evaluation.pair_classification import classification_metrics
from sbert.evaluation.retrievers import IndexRetriever, RetrievalSettings

SHARES = ("accuracy", "f1", "precision", "recall", "ap")  # reported x 100


class TriageEvaluator:
    """Duplicate / not-duplicate pairs of ``collection`` (``negatives`` hard non-duplicates per query, at most
    ``max_queries`` queries drawn by ``seed``): the best-F1 cosine threshold and its precision and recall.
    Headline: ``f1``."""

    def __init__(
        self,
        collection: RetrievalCollection,
        name: str | None = None,
        batch_size: int = 32,
        negatives: int = 1,
        seed: int = 0,
        max_queries: int | None = None,
    ) -> None:
        self.collection, self.name = collection, name or collection.name
        self.batch_size, self.negatives, self.seed, self.max_queries = batch_size, negatives, seed, max_queries

    def primary_metric(self, model: Any) -> str:
        return "f1"

    def __call__(self, model: Any, show_progress: bool | None = None) -> dict[str, float]:
        scores, labels = self.scored_pairs(model, show_progress)
        metrics = classification_metrics(scores, labels)
        out = {key: float(100 * value if key in SHARES else value) for key, value in metrics.items()}
        return {**out, "pairs": len(labels), "duplicates": int(sum(labels))}

    def scored_pairs(self, model: Any, show_progress: bool | None = None) -> tuple[np.ndarray, list[int]]:
        """(the cosine of each pair, its label: 1 duplicate, 0 not), the pairs drawn with ``model`` ranking."""
        retriever = IndexRetriever(RetrievalSettings(batch_size=self.batch_size))
        retriever.index(model, list(self.collection.corpus.values()), show_progress=show_progress)

        def ranked(queries: Sequence[str]) -> list[list[str]]:
            found = retriever.search(model, list(queries), self.negatives + 10)  # room past the relevant ones
            return [[hit.id for hit in row] for row in found]

        pairs, labels = classification_pairs(
            self.collection, self.seed, self.max_queries, self.negatives, ranker=ranked
        )
        return pair_cosines(model, pairs, self.batch_size, show_progress), labels


def pair_cosines(
    model: Any, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress: bool | None = None
) -> np.ndarray:
    """The cosine of each (query, document) pair as a search scores it: ``encode_query`` against
    ``encode_document`` (each distinct text embedded once)."""
    queries = list(dict.fromkeys(q for q, _ in pairs))
    documents = list(dict.fromkeys(d for _, d in pairs))
    options = {"batch_size": batch_size, "show_progress": show_progress}
    q_vectors = np.asarray(model.encode_query(queries, **options), dtype=np.float64)
    d_vectors = np.asarray(model.encode_document(documents, **options), dtype=np.float64)
    q_row, d_row = {t: i for i, t in enumerate(queries)}, {t: i for i, t in enumerate(documents)}
    a = q_vectors[[q_row[q] for q, _ in pairs]]
    b = d_vectors[[d_row[d] for _, d in pairs]]
    return np.sum(a * b, axis=1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
