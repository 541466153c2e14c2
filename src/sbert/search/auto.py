"""Choose how to search a collection from its documents alone (``--auto``): never from judged queries.

Pseudo-queries are held out from the corpus: for ``queries`` documents drawn by a seed, the query is the
document's title (its document is then indexed without it) or a span of 16 words cut out of its text (its
document indexed without the span); ``KINDS`` says which: by default (``mixed``) a coin decides, document
by document (titles alone were saturated on SciFact, where every fusion found ~96% of them, and could not
rank fusions a point apart on real questions). Every way of searching in ``CHOICES``
(dense, BM25, their weighted and reciprocal-rank fusions, each over whole or chunked documents) is scored
by NDCG@10 on these queries, and the best is chosen, unless it is ahead of the way a user who passes no
option searches (``default_choice``: whole documents, weighted fusion at ``fusion.ALPHA``) by no more than
``KEEP_DEFAULT_WITHIN`` standard errors of the per-query differences: then the default stays (the
one-standard-error rule of model selection, with the default in place of the simplest model). 200
pseudo-queries rank the top few choices no better than a coin, and the default did well on both
collections (docs/retrieval.md), where a coin's pick lost 3.1 MRR@10 on bug reports. Ties go to the
earlier (simpler) choice.

The choice and its evidence are plain data (``AutoResult.record``): an index keeps them in its manifest
and ``sbert search`` applies them; ``sbert eval --auto`` reports the test-query score of the choice.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sbert.data.beir import Document
from sbert.search.fusion import ALPHA, DEFAULT_FUSION

SPAN_WORDS = 16  # a held-out span's length, for documents without a title
MIN_WORDS = 24  # an untitled document shorter than this is never held out
QUERIES = 200  # pseudo-queries drawn by default (``--auto-queries``)
KEEP_DEFAULT_WITHIN = 1.0  # standard errors the best must be ahead of the default by, for the default to go


@dataclass(frozen=True)
class SearchChoice:
    """One way of searching: ``chunk`` documents into windows (scored by the best window), ``hybrid``
    with BM25 fused by ``fusion`` at dense weight ``alpha`` (``alpha`` 0: BM25's ranking alone)."""

    name: str
    chunk: bool = False
    hybrid: bool = False
    fusion: str = "weighted"
    alpha: float = 0.5

    def search_settings(self) -> dict[str, Any]:
        """What ``sbert search`` applies: hybrid, fusion and alpha."""
        return {"hybrid": self.hybrid, "fusion": self.fusion, "alpha": self.alpha}


CHOICES: tuple[SearchChoice, ...] = (
    SearchChoice("dense"),
    SearchChoice("bm25", hybrid=True, alpha=0.0),
    SearchChoice("hybrid weighted 0.3", hybrid=True, alpha=0.3),
    SearchChoice("hybrid weighted 0.5", hybrid=True, alpha=0.5),
    SearchChoice("hybrid weighted 0.7", hybrid=True, alpha=0.7),
    SearchChoice("hybrid rrf", hybrid=True, fusion="rrf"),
    SearchChoice("chunked dense", chunk=True),
    SearchChoice("chunked hybrid weighted 0.5", chunk=True, hybrid=True, alpha=0.5),
    SearchChoice("chunked hybrid weighted 0.7", chunk=True, hybrid=True, alpha=0.7),
)


def default_choice(choices: Sequence[SearchChoice]) -> SearchChoice | None:
    """The choice that searches as a user who passes no option does (whole documents, ``DEFAULT_FUSION`` at
    ``ALPHA``), if ``choices`` hold it."""
    return next(
        (c for c in choices if not c.chunk and c.hybrid and c.fusion == DEFAULT_FUSION and c.alpha == ALPHA), None
    )


@dataclass
class HeldOut:
    """Pseudo-queries and the corpus to search them in: ``queries`` (id -> text), ``relevant`` (query id
    -> its document's id) and ``documents`` (the corpus, held-out documents without their query)."""

    queries: dict[str, str]
    relevant: dict[str, str]
    documents: list[Document]


@dataclass
class AutoResult:
    """The chosen way of searching, each choice's NDCG@10 on the pseudo-queries, and how many there were."""

    choice: SearchChoice
    scores: dict[str, float]
    queries: int
    seed: int
    kinds: dict[str, int] = field(default_factory=dict)  # pseudo-queries by kind: title, span
    margin: Margin | None = None  # the best on the pseudo-queries against the runner-up, query by query
    drawn: str = ""  # how they were drawn: a ``KINDS`` name
    best: SearchChoice | None = None  # the best on the pseudo-queries (``choice`` unless the default stayed)
    over_default: Margin | None = None  # ``best`` against ``default_choice``, query by query (None: it is it)

    @property
    def stayed_with_default(self) -> bool:
        """Whether ``choice`` is the default because the best was not ahead of it beyond noise."""
        return self.best is not None and self.best != self.choice

    def record(self) -> dict[str, Any]:
        """For a manifest or a JSON report."""
        return {
            "choice": asdict(self.choice),
            "ndcg@10": {name: round(score, 4) for name, score in self.scores.items()},
            "pseudo_queries": self.queries,
            "kinds": self.kinds,
            **({"drawn": self.drawn} if self.drawn else {}),
            "seed": self.seed,
            **({"best": self.best.name} if self.best else {}),
            **({"runner_up": self.margin.record()} if self.margin else {}),
            **({"over_default": self.over_default.record()} if self.over_default else {}),
            "stayed_with_default": self.stayed_with_default,
        }

    def summary(self) -> str:
        """One line a person reads: the choice, its score, why it was chosen, and whether a gap is noise."""
        best = self.best or self.choice
        chose = f"auto: chose {self.choice.name} (NDCG@10 {self.scores[self.choice.name]:.2f} on {self.queries} "
        chose += "pseudo-queries held out from the corpus"
        if self.stayed_with_default and self.over_default:
            gap, error = self.over_default.gap, self.over_default.standard_error
            return (
                f"{chose}): the default way of searching, kept because the best on these pseudo-queries, "
                f"{best.name} ({self.scores[best.name]:.2f}), is ahead of it by {gap:.2f}, not more than "
                f"{KEEP_DEFAULT_WITHIN:g} standard error ({error:.2f})"
            )
        ranked = sorted(self.scores.items(), key=lambda kv: -kv[1])
        runner = f"; next {ranked[1][0]} {ranked[1][1]:.2f}" if len(ranked) > 1 else ""
        if self.margin and self.margin.within_noise:
            runner += (
                f"; the gap, {self.margin.gap:.2f}, is within noise (standard error {self.margin.standard_error:.2f}): "
                "either would do as well on these pseudo-queries"
            )
        if self.over_default:
            runner += f"; ahead of the default, {self.over_default.runner_up}, by {self.over_default.gap:.2f}"
            runner += f" (standard error {self.over_default.standard_error:.2f})"
        return f"{chose}{runner})"


@dataclass(frozen=True)
class Margin:
    """How far the choice is ahead of ``runner_up``: the mean of the per-query NDCG@10 differences
    (``gap``, x 100) and its standard error; ``within_noise`` where the gap is at most two standard errors
    (a tie is)."""

    runner_up: str
    gap: float
    standard_error: float

    @property
    def within_noise(self) -> bool:
        return not self.ahead_by_more_than(2)

    def ahead_by_more_than(self, errors: float) -> bool:
        """Whether the gap is more than ``errors`` standard errors."""
        return self.gap > errors * self.standard_error

    def record(self) -> dict[str, Any]:
        return {"name": self.runner_up, "gap": round(self.gap, 4), "standard_error": round(self.standard_error, 4)}


def paired_margin(runner_up: str, best: Sequence[float], other: Sequence[float]) -> Margin:
    """``Margin`` of per-query scores ``best`` over ``other`` (0-1 each, the same queries in order)."""
    import math

    diffs = [100 * (a - b) for a, b in zip(best, other, strict=True)]
    mean = sum(diffs) / len(diffs)
    if len(diffs) < 2:
        return Margin(runner_up, mean, math.inf)
    variance = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return Margin(runner_up, mean, math.sqrt(variance / len(diffs)))


HeldOutQuery = tuple[str, Document] | None  # (query, the document without it), or None: it gives none


def _title(document: Document, rng: random.Random) -> HeldOutQuery:
    """A titled document's title (the document indexed without it); a span for an untitled one."""
    if document.title.strip() and document.text.split():
        return document.title.strip(), Document(document.id, "", document.text)
    return _span(document, rng)


def _span(document: Document, rng: random.Random) -> HeldOutQuery:
    """``SPAN_WORDS`` words cut out of the document's text (its title, if any, stays); none under ``MIN_WORDS``."""
    words = document.text.split()
    if len(words) < MIN_WORDS:
        return None
    start = rng.randrange(len(words) - SPAN_WORDS + 1)
    rest = words[:start] + words[start + SPAN_WORDS :]
    return " ".join(words[start : start + SPAN_WORDS]), Document(document.id, document.title, " ".join(rest))


def _mixed(document: Document, rng: random.Random) -> HeldOutQuery:
    """The title or a span, one or the other by the seed's coin (a span for an untitled document)."""
    return _title(document, rng) if rng.random() < 0.5 else _span(document, rng)


KINDS: dict[str, Callable[[Document, random.Random], HeldOutQuery]] = {
    "mixed": _mixed,
    "title": _title,
    "span": _span,
}
KIND = "mixed"  # the default (``--auto-query-kind``): the lowest mean gap on two collections (docs/retrieval.md)


def held_out_queries(documents: Sequence[Document], queries: int = QUERIES, seed: int = 0, kind: str = KIND) -> HeldOut:
    """Draw up to ``queries`` pseudo-queries of ``kind`` (``KINDS``) and the corpus without them."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of pseudo-query {kind!r}: expected one of {', '.join(KINDS)}")
    rng = random.Random(seed)
    order = list(range(len(documents)))
    rng.shuffle(order)
    chosen: dict[int, tuple[str, Document]] = {}
    for i in order:
        if len(chosen) >= queries:
            break
        found = KINDS[kind](documents[i], rng)
        if found is not None:
            chosen[i] = found
    if not chosen:
        raise ValueError(
            f"none of the {len(documents)} documents can give a pseudo-query: --auto needs titles or documents "
            f"of at least {MIN_WORDS} words"
        )
    corpus = [chosen[i][1] if i in chosen else d for i, d in enumerate(documents)]
    ids = {i: f"auto-{n}" for n, i in enumerate(sorted(chosen))}
    return HeldOut(
        {ids[i]: chosen[i][0] for i in sorted(chosen)}, {ids[i]: documents[i].id for i in sorted(chosen)}, corpus
    )


def held_out_ids(documents: Sequence[Document], queries: int = QUERIES, seed: int = 0, kind: str = KIND) -> set[str]:
    """The ids of the documents ``held_out_queries`` draws its pseudo-queries from (none when no document
    can give one): ``sbert adapt --hold-out`` leaves them out of training."""
    try:
        return set(held_out_queries(documents, queries, seed, kind).relevant.values())
    except ValueError:
        return set()


def choose_search(
    encoder: Any,
    documents: Sequence[Document],
    *,
    model: str = "auto",
    queries: int = QUERIES,
    seed: int = 0,
    choices: Sequence[SearchChoice] = CHOICES,
    kind: str = KIND,
    keep_default: bool = True,
    batch_size: int = 32,
    show_progress: bool | None = None,
) -> AutoResult:
    """Score every choice on pseudo-queries held out from ``documents`` (one in-memory index per chunking,
    with BM25) and return the best, by NDCG@10 (ties go to the earlier choice), or, with ``keep_default``,
    ``default_choice`` where the best is ahead of it by no more than ``KEEP_DEFAULT_WITHIN`` standard errors."""
    from sbert.documents import Chunking
    from sbert.search.retrieve import SearchOptions, build_index, search_texts

    held = held_out_queries(documents, queries, seed, kind)
    texts, ids = [d.joined() for d in held.documents], [d.id for d in held.documents]
    query_ids, query_texts = list(held.queries), list(held.queries.values())
    scores: dict[str, float] = {}
    per_query: dict[str, list[float]] = {}
    with reusing_vectors(encoder):  # a document in one window is embedded as a whole one: once
        for chunk in dict.fromkeys(c.chunk for c in choices):
            index = build_index(
                None, encoder, texts, ids, model=model, chunking=Chunking() if chunk else None, bm25=True,
                batch_size=batch_size, show_progress=show_progress,
            )  # fmt: skip
            for choice in (c for c in choices if c.chunk == chunk):
                options = SearchOptions(10, hybrid=choice.hybrid, fusion=choice.fusion, alpha=choice.alpha)
                hits = search_texts(index, encoder, query_texts, options, batch_size=batch_size)
                pairs = zip(query_ids, hits, strict=True)
                found = [ndcg_of_one([h.id for h in ranked], held.relevant[q]) for q, ranked in pairs]
                scores[choice.name], per_query[choice.name] = 100 * sum(found) / len(found), found
    titles = {d.id: d.title.strip() for d in documents}
    kinds = {"title": sum(1 for q, text in held.queries.items() if text == titles[held.relevant[q]])}
    kinds["span"] = len(held.queries) - kinds["title"]
    return AutoResult(scores=scores, queries=len(held.queries), seed=seed, kinds=kinds, drawn=kind,
                      **decide(choices, per_query, keep_default))  # fmt: skip


def decide(
    choices: Sequence[SearchChoice], per_query: dict[str, Sequence[float]], keep_default: bool = True
) -> dict[str, Any]:
    """From each choice's per-query NDCG@10 (0-1, the same queries in order): the best by mean (ties to the
    earlier choice), its margin over the runner-up and over ``default_choice``, and the choice: the
    default where ``keep_default`` and the best is ahead of it by no more than ``KEEP_DEFAULT_WITHIN``
    standard errors."""
    mean = {c.name: sum(per_query[c.name]) / max(1, len(per_query[c.name])) for c in choices}
    ranked = sorted(choices, key=lambda c: (mean[c.name], -choices.index(c)), reverse=True)
    best = ranked[0]
    margin = paired_margin(ranked[1].name, per_query[best.name], per_query[ranked[1].name]) if len(ranked) > 1 else None
    default = default_choice(choices)
    over = None
    if default is not None and default != best:
        over = paired_margin(default.name, per_query[best.name], per_query[default.name])
    stays = keep_default and over is not None and not over.ahead_by_more_than(KEEP_DEFAULT_WITHIN)
    choice = default if stays else best
    return {"choice": choice, "best": best, "margin": margin, "over_default": over}


def reusing_vectors(encoder: Any) -> contextlib.AbstractContextManager:
    """``encoder.reusing_vectors()`` (``sbert.encoder.Encoder``), or nothing for an encoder without it: wrap
    ``choose_search`` and the index built after it, so that the documents the choice did not change (all
    but the held-out ones, and windows equal to whole documents) are embedded once."""
    reuse = getattr(encoder, "reusing_vectors", None)
    return reuse() if callable(reuse) else contextlib.nullcontext()


def ndcg_of_one(ranked: Sequence[str], relevant: str, k: int = 10) -> float:
    """NDCG@k with one relevant document (``evaluation.retrieval.ndcg_at_k``'s value): 1/log2(rank + 1)."""
    import math

    top = list(ranked[:k])
    return 1.0 / math.log2(top.index(relevant) + 2) if relevant in top else 0.0


def index_settings(result: AutoResult) -> dict[str, Any]:
    """What an index built by ``--auto`` records under ``search`` in its manifest: the search settings
    ``sbert search`` applies, and the evidence."""
    return {**result.choice.search_settings(), "auto": result.record()}
