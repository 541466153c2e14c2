"""Hard-negative mining: for each query, corpus texts the model ranks high that are not judged relevant.

Hard negatives make in-batch-negatives training harder and better, but the texts a model ranks just
below the positives are also the likeliest unjudged positives (false negatives). The filters keep
those out, with the names sentence-transformers' ``mine_hard_negatives`` uses:

- rank range: candidates are the corpus ranked by the model (exact cosine search), with the query's
  positives (and texts identical to one) taken out; ranks ``range_min`` (0-based, inclusive) to
  ``range_max`` (exclusive) are kept. Skipping the first few ranks skips the likeliest false negatives.
  (sentence-transformers counts ``range_min`` after its score filters; here a rank does not depend on
  the filters.)
- ``absolute_margin``: keep a candidate only if its score + margin <= the positive's score;
- ``relative_margin``: keep it only if its score <= positive - |positive| * margin (0.05: at least 5%
  below the positive, NV-Retriever's "TopK-PercPos 95%");
- ``max_score`` / ``min_score``: a ceiling and a floor on the score itself.

With several positives per query, the margins are taken against the lowest-scored one. From what is
left, ``sampling="top"`` takes the best ``num_negatives``; ``"random"`` draws them (seeded) and orders
them by score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sbert.data.examples import RetrievalExample
from sbert.protocols import TextEncoder

FILTERS = ("absolute_margin", "relative_margin", "max_score", "min_score")


@dataclass(frozen=True)
class NegativeFilters:
    """Which candidates may be negatives (see the module's docstring); ``range_max=None`` derives it as
    sentence-transformers does: ``range_min + num_negatives`` (x 10 when a score filter is set)."""

    num_negatives: int = 3
    range_min: int = 0
    range_max: int | None = None
    absolute_margin: float | None = None
    relative_margin: float | None = None
    max_score: float | None = None
    min_score: float | None = None
    sampling: str = "top"  # or "random"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_negatives < 1:
            raise ValueError(f"num_negatives must be at least 1, got {self.num_negatives}")
        if self.range_min < 0:
            raise ValueError(f"range_min must be 0 or more, got {self.range_min}")
        if self.range_end - self.range_min < self.num_negatives:
            raise ValueError(
                f"ranks {self.range_min} to {self.range_end} (range_min to range_max) hold fewer than "
                f"num_negatives={self.num_negatives} candidates; widen the range or ask for fewer negatives"
            )
        if self.sampling not in ("top", "random"):
            raise ValueError(f"sampling must be 'top' or 'random', got {self.sampling!r}")

    @property
    def range_end(self) -> int:
        if self.range_max is not None:
            return self.range_max
        scored = any(getattr(self, name) is not None for name in FILTERS)
        return self.range_min + self.num_negatives * (10 if scored else 1)

    def failed(self, score: float, positive: float) -> str | None:
        """The first filter ``score`` fails against the (lowest) positive score ``positive``; None if none."""
        if self.absolute_margin is not None and score + self.absolute_margin > positive:
            return "absolute_margin"
        if self.relative_margin is not None and score > positive - abs(positive) * self.relative_margin:
            return "relative_margin"
        if self.max_score is not None and score > self.max_score:
            return "max_score"
        if self.min_score is not None and score < self.min_score:
            return "min_score"
        return None


@dataclass(frozen=True)
class MinedRow:
    """One (query, positive) judgment with the query's negatives, best first, and the model's cosines."""

    query_id: str
    positive_id: str
    negative_ids: tuple[str, ...]
    positive_score: float
    negative_scores: tuple[float, ...]


@dataclass
class MinedNegatives:
    """What mining found: a row per (query, positive), the texts to turn them into training examples,
    and how many candidates each filter removed (``skipped``) and how many queries came up short."""

    rows: list[MinedRow]
    queries: Mapping[str, str]
    corpus: Mapping[str, str]
    skipped: dict[str, int] = field(default_factory=dict)
    short_queries: int = 0  # queries with fewer than num_negatives negatives left
    dropped_rows: int = 0  # rows of short queries left out (keep_incomplete=False)

    def examples(self, triplets: bool = False) -> list[RetrievalExample]:
        """One (query, positive, negatives) example per row; with ``triplets``, one per (row, negative)."""
        out = []
        for row in self.rows:
            query, positive = self.queries[row.query_id], self.corpus[row.positive_id]
            negatives = [self.corpus[n] for n in row.negative_ids]
            if triplets:
                out += [RetrievalExample(query, positive, (n,)) for n in negatives]
            else:
                out.append(RetrievalExample(query, positive, tuple(negatives)))
        return out

    def extras(self, triplets: bool = False) -> list[dict]:
        """The ids and scores of each example of ``examples(triplets)``, for a ``.jsonl`` file."""
        out = []
        for row in self.rows:
            pairs = [((n,), (s,)) for n, s in zip(row.negative_ids, row.negative_scores, strict=True)]
            for ids, scores in pairs if triplets else [(row.negative_ids, row.negative_scores)]:
                out.append(
                    {
                        "query_id": row.query_id,
                        "positive_id": row.positive_id,
                        "negative_ids": list(ids),
                        "scores": [row.positive_score, *scores],
                    }
                )
        return out


def choose_negatives(
    ranked: Sequence[int],
    scores: Sequence[float],
    excluded: set[int],
    positive_score: float,
    filters: NegativeFilters,
    skipped: dict[str, int],
    rng: np.random.Generator | None = None,
) -> list[int]:
    """The negatives of one query: candidate positions ``ranked`` (best first, ``scores`` alike) without
    ``excluded`` (its positives; -1 is padding), cut to the rank range, filtered, then the best (or a
    seeded random draw of) ``num_negatives``, best first. ``skipped`` counts what each filter removed."""
    kept = [(c, s) for c, s in zip(ranked, scores, strict=True) if c >= 0 and c not in excluded]
    passed = []
    for c, s in kept[filters.range_min : filters.range_end]:
        reason = filters.failed(float(s), positive_score)
        if reason is None:
            passed.append(c)
        else:
            skipped[reason] = skipped.get(reason, 0) + 1
    if filters.sampling == "top" or len(passed) <= filters.num_negatives:
        return passed[: filters.num_negatives]
    rng = rng if rng is not None else np.random.default_rng(filters.seed)
    drawn = rng.choice(len(passed), size=filters.num_negatives, replace=False)
    return [passed[i] for i in sorted(drawn)]  # positions in ``passed`` are in score order


def pairs_collection(
    pairs: Sequence[tuple[str, str]], corpus: Sequence[str] = ()
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """(queries, corpus, qrels) with positional ids from (query, positive) text pairs: equal texts share
    an id, so a query with several positives is one query; the positives join ``corpus``."""
    query_ids: dict[str, str] = {}
    doc_ids: dict[str, str] = {}
    for text in [*corpus, *(p for _, p in pairs)]:
        doc_ids.setdefault(text, str(len(doc_ids)))
    qrels: dict[str, dict[str, int]] = {}
    for query, positive in pairs:
        qid = query_ids.setdefault(query, str(len(query_ids)))
        qrels.setdefault(qid, {})[doc_ids[positive]] = 1
    return {i: t for t, i in query_ids.items()}, {i: t for t, i in doc_ids.items()}, qrels


def mine_hard_negatives(
    model: TextEncoder,
    queries: Mapping[str, str],
    corpus: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    filters: NegativeFilters | None = None,
    *,
    keep_incomplete: bool = False,
    batch_size: int = 32,
    show_progress: bool | None = None,
) -> MinedNegatives:
    """Mine negatives for every query of ``qrels`` (query id -> {document id: relevance}; above 0 is
    relevant) from ``corpus`` (id -> text) with ``model``'s cosine, by ``filters``. Queries are embedded by
    ``model.encode_query`` and documents by ``encode_document`` where the model has them (its prompts).

    Rows of queries left with fewer than ``num_negatives`` negatives are dropped (n-tuples need all n)
    unless ``keep_incomplete``; in-batch-negatives training takes rows with different counts.
    """
    from sbert.search.exact import pair_scores, semantic_search

    filters = filters or NegativeFilters()
    _check_ids(queries, corpus, qrels)
    ids = list(corpus)
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    judged = [q for q in qrels if any(s > 0 for s in qrels[q].values())]
    positives = [[position[d] for d, s in qrels[q].items() if s > 0] for q in judged]
    # as the model will be searched: queries with its query prompt, documents with its document prompt
    encode_queries = getattr(model, "encode_query", model.encode)
    encode_documents = getattr(model, "encode_document", model.encode)
    q_emb = encode_queries([queries[q] for q in judged], batch_size=batch_size, show_progress=show_progress)
    c_emb = encode_documents([corpus[d] for d in ids], batch_size=batch_size, show_progress=show_progress)
    excluded = _positives_and_copies(positives, ids, corpus)
    top = semantic_search(q_emb, c_emb, top_k=filters.range_end + max((len(e) for e in excluded), default=0))
    flat = [p for group in positives for p in group]
    owner = np.repeat(np.arange(len(judged)), [len(p) for p in positives])
    pos_scores = pair_scores(q_emb[owner], c_emb[flat], "cosine") if flat else np.zeros(0)
    mined = MinedNegatives([], queries, corpus)
    rng = np.random.default_rng(filters.seed)
    offset = 0
    for row, query_id in enumerate(judged):
        own = pos_scores[offset : offset + len(positives[row])]
        offset += len(positives[row])
        chosen = choose_negatives(
            top.indices[row], top.scores[row], excluded[row], float(own.min()), filters, mined.skipped, rng
        )
        _add_rows(mined, query_id, positives[row], own, chosen, top, row, ids, filters.num_negatives, keep_incomplete)
    return mined


def _positives_and_copies(positives: list[list[int]], ids: list[str], corpus: Mapping[str, str]) -> list[set[int]]:
    """Per query, the corpus positions that are never its negatives: its positives and texts equal to one."""
    by_text: dict[str, list[int]] = {}
    for i, doc_id in enumerate(ids):
        by_text.setdefault(corpus[doc_id], []).append(i)
    return [{i for p in group for i in by_text[corpus[ids[p]]]} for group in positives]


def _check_ids(queries: Mapping[str, str], corpus: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]]) -> None:
    for query_id, judged in qrels.items():
        if query_id not in queries:
            raise ValueError(f"qrels: query {query_id!r} has no text in queries")
        unknown = next((d for d, s in judged.items() if s > 0 and d not in corpus), None)
        if unknown is not None:
            raise ValueError(f"qrels: document {unknown!r} (relevant to query {query_id!r}) is not in the corpus")


def _add_rows(mined: MinedNegatives, query_id: str, positives, own, chosen, top, row, ids, wanted, keep) -> None:
    """One row per positive of ``query_id`` with its ``chosen`` negatives; a short query's rows are
    dropped unless ``keep``."""
    if len(chosen) < wanted:
        mined.short_queries += 1
        if not keep:
            mined.dropped_rows += len(positives)
            return
    score_of = dict(zip(top.indices[row].tolist(), top.scores[row].tolist(), strict=True))
    negative_ids = tuple(ids[c] for c in chosen)
    negative_scores = tuple(float(score_of[c]) for c in chosen)
    for p, s in zip(positives, own, strict=True):
        mined.rows.append(MinedRow(query_id, ids[p], negative_ids, float(s), negative_scores))
