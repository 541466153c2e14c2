"""Retrieval evaluation: NDCG, MRR, MAP, recall, precision and accuracy at k, plus query latency.

The metrics are computed as sentence-transformers' ``InformationRetrievalEvaluator`` computes them:
relevance is binary (a document is relevant or not), NDCG's ideal ranking has ``min(k, #relevant)``
relevant documents, MAP@k divides by ``min(k, #relevant)``, recall@k by ``#relevant``, precision@k by
``k``; queries without a relevant document are left out. Each metric function takes one query's
ranking (document ids, best first) and its relevant ids, and returns a fraction in [0, 1];
``RetrievalEvaluator`` reports the means over the queries x 100.

How documents are embedded and searched is a ``Retriever`` (``sbert.evaluation.retrievers``):
``index(model, documents)`` once, then ``search(model, queries, k)``. The default, ``IndexRetriever()``,
runs the code ``sbert index build`` + ``sbert search`` run: each document (title + text, cut at the
model's ``max_seq_length``) embedded with ``model.encode_document`` into an index in memory, each query
with ``model.encode_query``, searched exactly. ``write_run`` writes the rankings as a TREC run file.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sbert.data.beir import RetrievalCollection
from sbert.evaluation.ranking_metrics import (
    METRICS,
    accuracy_at_k,
    map_at_k,
    mrr_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
)
from sbert.evaluation.retrievers import Hit, IndexRetriever, Retriever

__all__ = [
    "DEFAULT_AT",
    "METRICS",
    "Hit",
    "IndexRetriever",
    "RetrievalEvaluator",
    "Retriever",
    "accuracy_at_k",
    "map_at_k",
    "mrr_at_k",
    "ndcg_at_k",
    "precision_at_k",
    "query_latency",
    "recall_at_k",
    "retrieval_metrics",
    "write_run",
    "write_runs",
]
# Cutoffs per metric: sentence-transformers' defaults, with recall@100 added.
DEFAULT_AT: dict[str, tuple[int, ...]] = {
    "accuracy": (1, 3, 5, 10),
    "precision": (1, 3, 5, 10),
    "recall": (1, 3, 5, 10, 100),
    "mrr": (10,),
    "ndcg": (10,),
    "map": (100,),
}


def retrieval_metrics(
    rankings: Mapping[str, Sequence[str]],
    relevant: Mapping[str, Collection[str]],
    at: Mapping[str, Sequence[int]] = DEFAULT_AT,
) -> dict[str, float]:
    """Mean of each metric over the queries of ``relevant`` that have a relevant document, as fractions:
    ``{"ndcg@10": ..., "recall@100": ...}``. ``rankings``: query id -> document ids best first (a query
    missing from it counts as an empty ranking). ``at``: metric name (``METRICS``) -> cutoffs."""
    unknown = set(at) - set(METRICS)
    if unknown:
        raise ValueError(f"unknown retrieval metrics {sorted(unknown)}; expected some of {', '.join(METRICS)}")
    judged = [q for q, docs in relevant.items() if docs]
    if not judged:
        raise ValueError("no query has a relevant document; retrieval metrics need at least one")
    out: dict[str, float] = {}
    for name, cutoffs in at.items():
        for k in cutoffs:
            values = [METRICS[name](rankings.get(q, ()), relevant[q], k) for q in judged]
            out[f"{name}@{k}"] = float(np.mean(values))
    return out


def query_latency(retriever: Retriever, model: Any, queries: Sequence[str], k: int) -> dict[str, float]:
    """p50 and p99 milliseconds of ``retriever.search`` on one query at a time (after one untimed
    warm-up query), over ``queries``; nothing for no queries."""
    if not queries:
        return {}
    retriever.search(model, [queries[0]], k)
    times = []
    for query in queries:
        began = time.perf_counter()
        retriever.search(model, [query], k)
        times.append(1000 * (time.perf_counter() - began))
    p50, p99 = np.percentile(times, [50, 99])
    return {"query_ms_p50": float(p50), "query_ms_p99": float(p99)}


class RetrievalEvaluator:
    """Retrieval metrics x 100 (``ndcg@10`` the headline, ``mrr@10``, ``map@100``, ``recall@k``,
    ``precision@k``, ``accuracy@k``) of a model on one split of a collection, plus timings:
    ``corpus_seconds`` (indexing the corpus), ``query_ms_p50``/``query_ms_p99`` (one query at a time,
    embedding and search, over the first ``latency_queries`` queries; 0 skips it) and counts.

    ``retriever``: how documents are embedded and searched (default ``IndexRetriever()``: the index code, in memory).
    ``at``: cutoffs per metric (``DEFAULT_AT``); search returns the top max(cutoffs).
    """

    def __init__(
        self,
        collection: RetrievalCollection,
        name: str | None = None,
        retriever: Retriever | None = None,
        batch_size: int = 32,
        at: Mapping[str, Sequence[int]] = DEFAULT_AT,
        latency_queries: int = 200,
    ) -> None:
        self.collection, self.name = collection, name or collection.name
        # Only the queries with a relevant document, as in sentence-transformers.
        relevant = {q: collection.relevant(q) for q in collection.queries}
        self.relevant = {q: docs for q, docs in relevant.items() if docs}
        if not self.relevant:
            raise ValueError(f"{self.name}: no query of split {collection.split!r} has a relevant document")
        if "ndcg" not in at or 10 not in at["ndcg"]:
            raise ValueError(f"{self.name}: the cutoffs must include ndcg@10, the headline metric")
        self.retriever = retriever or IndexRetriever(_settings(batch_size))
        self.run: dict[str, list[tuple[str, float]]] = {}  # the last call's rankings: query id -> (id, score)
        self.at, self.latency_queries = {m: tuple(ks) for m, ks in at.items()}, latency_queries
        self.k = max(k for ks in self.at.values() for k in ks)

    def primary_metric(self, model: Any) -> str:
        """NDCG@10 x 100 (BEIR's and sentence-transformers' headline)."""
        return "ndcg@10"

    def __call__(self, model: Any, show_progress: bool | None = None) -> dict[str, float]:
        queries = {q: self.collection.queries[q] for q in self.relevant}
        began = time.perf_counter()
        self.retriever.index(model, list(self.collection.corpus.values()), show_progress=show_progress)
        corpus_seconds = time.perf_counter() - began
        hits = self.retriever.search(model, list(queries.values()), self.k)
        self.run = {q: [(str(h[0]), float(h[1])) for h in row] for q, row in zip(queries, hits, strict=True)}
        rankings = {q: [doc for doc, _ in row] for q, row in self.run.items()}
        metrics = {m: 100 * v for m, v in retrieval_metrics(rankings, self.relevant, self.at).items()}
        metrics["corpus_seconds"] = corpus_seconds
        if self.latency_queries > 0:
            sample = list(queries.values())[: self.latency_queries]
            metrics.update(query_latency(self.retriever, model, sample, self.k))
        metrics["queries"], metrics["documents"] = float(len(queries)), float(len(self.collection.corpus))
        return metrics


def _settings(batch_size: int):
    from sbert.evaluation.retrievers import RetrievalSettings

    return RetrievalSettings(batch_size=batch_size)


def write_run(path: str | Path, run: Mapping[str, Sequence[tuple[str, float]]], tag: str = "sbert") -> None:
    """Write ``run`` (query id -> (document id, score) best first) as a TREC run file, atomically: one line
    ``qid Q0 docid rank score tag`` per hit, ranks from 1 (what trec_eval, ranx and BEIR read)."""
    from sbert.atomic import atomic_file

    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"a run's tag must be one word, got {tag!r}")
    with atomic_file(path, "w", encoding="utf-8") as handle:
        for query, hits in run.items():
            for rank, (doc, score) in enumerate(hits, 1):
                if any(c.isspace() for c in f"{query}{doc}"):
                    raise ValueError(f"TREC run files cannot hold ids with white space: {query!r}, {doc!r}")
                handle.write(f"{query} Q0 {doc} {rank} {score:.9g} {tag}\n")


def write_runs(path: str | Path, runs: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]]) -> list[Path]:
    """Write each named run (``RetrievalEvaluator.run``) as a TREC run file tagged with its name: at ``path``
    for one run, else at ``<stem>.<name><suffix>`` beside it for each; returns the files written."""
    path = Path(path)
    if not runs:
        raise ValueError(f"{path}: no retrieval was evaluated, so there is no run to write")
    out = []
    for name, run in runs.items():
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        target = path if len(runs) == 1 else path.with_name(f"{path.stem}.{safe}{path.suffix}")
        write_run(target, run, tag=f"sbert-{safe}")
        out.append(target)
    return out
