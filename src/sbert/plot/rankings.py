"""Per-query rankings of a retrieval evaluation, the data ``sbert.plot.retrieval`` draws, and their JSON file.

The file (``sbert plot retrieval --save-rankings``) is one JSON object::

    {"format": "sbert-rankings/1", "name": "scifact", "model": "all-MiniLM-L6-v2",
     "queries": [{"id": "q1", "relevant": ["d3"], "hits": [["d3", 0.71], ["d9", 0.52]]}, ...]}

``hits`` are (document id, score) best first, as the retriever returned them; ``relevant`` the ids judged
relevant (queries without one are left out, as the evaluator leaves them out).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sbert.errors import InputFileError

FORMAT = "sbert-rankings/1"


@dataclass
class QueryRanking:
    id: str
    relevant: list[str]
    hits: list[tuple[str, float]]


@dataclass
class Rankings:
    """One system's rankings of one collection's queries."""

    name: str
    model: str
    queries: list[QueryRanking]

    def recall_curve(self, ks: Sequence[int] | np.ndarray) -> np.ndarray:
        """Mean recall@k over the queries for each k of ``ks`` (fractions, as ``recall_at_k``)."""
        from sbert.evaluation.retrieval import recall_at_k

        ranked = [([doc for doc, _ in q.hits], set(q.relevant)) for q in self.queries]
        return np.array([np.mean([recall_at_k(docs, rel, k) for docs, rel in ranked]) for k in ks])

    def scores(self) -> tuple[np.ndarray, np.ndarray]:
        """Scores of the retrieved documents that are relevant, and of those that are not."""
        relevant = [s for q in self.queries for doc, s in q.hits if doc in set(q.relevant)]
        other = [s for q in self.queries for doc, s in q.hits if doc not in set(q.relevant)]
        return np.array(relevant, dtype=np.float64), np.array(other, dtype=np.float64)

    def depth(self) -> int:
        """The longest ranking: recall can be drawn up to this k."""
        return max((len(q.hits) for q in self.queries), default=0)


def rank(model: Any, collection: Any, retriever: Any = None, k: int = 100, batch_size: int = 32, show_progress=None):
    """Rankings of ``collection`` (``sbert.data.beir.read_beir``) by ``model`` through ``retriever``
    (default: the evaluator's ``IndexRetriever()``): the top ``k`` of each query that has a relevant document."""
    from sbert.evaluation.retrieval import RetrievalEvaluator
    from sbert.plot.style import model_label

    evaluator = RetrievalEvaluator(collection, retriever=retriever, batch_size=batch_size, latency_queries=0)
    queries = list(evaluator.relevant)
    evaluator.retriever.index(model, list(collection.corpus.values()), show_progress=show_progress)
    found = evaluator.retriever.search(model, [collection.queries[q] for q in queries], k)
    rows = [
        QueryRanking(q, sorted(evaluator.relevant[q]), [(str(h[0]), float(h[1])) for h in hits])
        for q, hits in zip(queries, found, strict=True)
    ]
    return Rankings(evaluator.name, model_label(model), rows)


def write_rankings(rankings: Rankings, path: str | Path) -> Path:
    """Write ``rankings`` as the JSON file this module describes, atomically."""
    from sbert.atomic import atomic_file

    body = {
        "format": FORMAT,
        "name": rankings.name,
        "model": rankings.model,
        "queries": [{"id": q.id, "relevant": q.relevant, "hits": [list(h) for h in q.hits]} for q in rankings.queries],
    }
    with atomic_file(path, "w", encoding="utf-8") as handle:
        json.dump(body, handle, ensure_ascii=False)
    return Path(path)


def _query(item: Any, where: str) -> QueryRanking:
    try:
        relevant = [str(d) for d in item["relevant"]]
        hits = [(str(doc), float(score)) for doc, score in item["hits"]]
        query = QueryRanking(str(item["id"]), relevant, hits)
    except (KeyError, TypeError, ValueError) as err:
        raise InputFileError(
            f'{where}: expected {{"id": ..., "relevant": [ids], "hits": [[id, score], ...]}} '
            f"({type(err).__name__}: {err})"
        ) from err
    if not relevant:
        raise InputFileError(f"{where} (query {query.id!r}): no relevant document; leave such queries out")
    return query


def read_rankings(path: str | Path) -> Rankings:
    """Rankings from the JSON file this module describes; a malformed file names the query at fault."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such file; expected a rankings JSON file or a BEIR folder")
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputFileError(f"{path}: not a JSON file ({err})") from err
    if not isinstance(body, dict) or body.get("format") != FORMAT or not isinstance(body.get("queries"), list):
        raise InputFileError(f'{path}: expected an object with "format": "{FORMAT}" and a "queries" list')
    queries = [_query(item, f"{path}: query {n}") for n, item in enumerate(body["queries"], 1)]
    if not queries:
        raise InputFileError(f"{path}: no queries")
    return Rankings(str(body.get("name") or path.stem), str(body.get("model") or "?"), queries)
