"""Is this already reported? The cut-offs ``sbert search --threshold`` and ``--lead`` need, chosen on judged
duplicates.

Two questions, one search. **Pairs** (``--threshold``, a cosine): each query of a collection's split is
paired with its relevant documents (duplicates) and with the ``negatives`` best-ranked documents it is not a
duplicate of (what a search shows first: the hard cases), ranked by the model through the index code
``sbert search`` runs; every pair is scored as that search scores a hit, the cosine of the query's
``encode_query`` vector and the document's ``encode_document`` vector. **Top hits** (``--lead``): whether
each query's top hit is a duplicate, told by its lead (``sbert.search.retrieve.hit_lead``: its cosine minus
the mean of hits 2-10's), which does not depend on where one query's cosines sit. Both are chosen on what
``--threshold`` and ``--lead`` compare: the hits' cosines (``Hit.cosine``), of a dense search, the search
``sbert search`` runs given either (a fused score is relative to each query and never compared). The metrics are
``sbert.evaluation.pair_classification``'s (the threshold with the best F1, and the best accuracy's), here
x 100 like the other tasks of ``sbert eval``; thresholds and leads stay cosines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from sbert.data.beir import RetrievalCollection
from sbert.data.beir_labelled_pairs import classification_pairs, drawn_queries
from sbert.evaluation.pair_classification import average_precision, best_f1, classification_metrics
from sbert.evaluation.retrievers import IndexRetriever, RetrievalSettings
from sbert.protocols import IndexEncoder
from sbert.search.retrieve import LEAD_HITS, cosine, lead

SHARES: tuple[str, ...] = ("accuracy", "f1", "precision", "recall", "ap", "lead_f1", "lead_precision", "lead_recall")
SHARES += ("lead_ap", "top_hit_right")  # reported x 100


class TriageScores(NamedTuple):
    """What ``TriageEvaluator`` measures: each pair's cosine and label (1 duplicate, 0 not); each drawn query's
    hits' cosines (best first, ``LEAD_HITS`` at most) and whether its top hit is a duplicate (1) or not (0)."""

    pair_scores: np.ndarray
    pair_labels: list[int]
    hit_scores: list[list[float]]
    top_hit_labels: list[int]

    @property
    def leads(self) -> np.ndarray:
        """Each drawn query's top-hit lead (``sbert.search.retrieve.lead``)."""
        return np.array([lead(scores) for scores in self.hit_scores])


class TriageEvaluator:
    """Duplicate / not-duplicate pairs of ``collection`` (``negatives`` hard non-duplicates per query, at most
    ``max_queries`` queries drawn by ``seed``): the best-F1 cosine threshold and its precision and recall;
    then the drawn queries' top hits: the best-F1 lead (``lead_threshold``, ``lead_f1``...) and the share
    of queries whose top hit is a duplicate (``top_hit_right``). Headline: ``f1``."""

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

    def __call__(self, model: IndexEncoder, show_progress: bool | None = None) -> dict[str, float]:
        found = self.scores(model, show_progress)
        metrics = classification_metrics(found.pair_scores, found.pair_labels)
        leads = found.leads
        f1, precision, recall, threshold = best_f1(leads, found.top_hit_labels)
        metrics |= {"lead_f1": f1, "lead_precision": precision, "lead_recall": recall, "lead_threshold": threshold}
        metrics["lead_ap"] = average_precision(leads, found.top_hit_labels)
        metrics["top_hit_right"] = float(np.mean(found.top_hit_labels))
        out = {key: float(100 * value if key in SHARES else value) for key, value in metrics.items()}
        return {**out, "pairs": len(found.pair_labels), "duplicates": int(sum(found.pair_labels))}

    def scores(self, model: IndexEncoder, show_progress: bool | None = None) -> TriageScores:
        """The pairs (drawn with ``model`` ranking) and the top hits of one search of the drawn queries."""
        retriever = IndexRetriever(RetrievalSettings(batch_size=self.batch_size))  # dense, as --lead searches
        retriever.index(model, list(self.collection.corpus.values()), show_progress=show_progress)
        searched: list[list[Any]] = []

        def ranked(queries: Sequence[str]) -> list[list[str]]:
            # room past the relevant ones, and at least the hits a lead is taken over
            found = retriever.search(model, list(queries), max(self.negatives + 10, LEAD_HITS))
            searched.extend(found)
            return [[hit.id for hit in row] for row in found]

        pairs, labels = classification_pairs(
            self.collection, self.seed, self.max_queries, self.negatives, ranker=ranked
        )
        queries = drawn_queries(self.collection, self.seed, self.max_queries)
        hit_scores = [[cosine(hit) for hit in row[:LEAD_HITS]] for row in searched]  # what --lead compares
        right = [int(row[0].id in self.collection.relevant(q)) for q, row in zip(queries, searched, strict=True)]
        return TriageScores(pair_cosines(model, pairs, self.batch_size, show_progress), labels, hit_scores, right)


def pair_cosines(
    model: IndexEncoder, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress: bool | None = None
) -> np.ndarray:
    """The cosine of each (query, document) pair as a search scores it: ``encode_query`` against
    ``encode_document`` (each distinct text embedded once)."""
    queries = list(dict.fromkeys(q for q, _ in pairs))
    documents = list(dict.fromkeys(d for _, d in pairs))
    q_vectors = np.asarray(model.encode_query(queries, batch_size=batch_size, show_progress=show_progress), np.float64)
    d_vectors = model.encode_document(documents, batch_size=batch_size, show_progress=show_progress)
    d_vectors = np.asarray(d_vectors, dtype=np.float64)
    q_row, d_row = {t: i for i, t in enumerate(queries)}, {t: i for i, t in enumerate(documents)}
    a = q_vectors[[q_row[q] for q, _ in pairs]]
    b = d_vectors[[d_row[d] for _, d in pairs]]
    return np.sum(a * b, axis=1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
