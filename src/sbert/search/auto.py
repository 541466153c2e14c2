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
collections (benchmarks/results/auto_kinds.md), where a coin's pick lost 3.1 MRR@10 on bug reports. Ties go to the
earlier (simpler) choice.

The choice and its evidence are plain data (``AutoResult.record``): an index keeps them in its manifest
and ``sbert search`` applies them; ``sbert eval --auto`` reports the test-query score of the choice.

This module owns which documents the pseudo-queries come from. ``sbert adapt`` asks it
(``adapt_hold_out``) and leaves them out of training, recording their ids in the model folder's
``adapt.json``; ``choose_search`` then draws from exactly those documents when the model it is given has
such a record (``AdaptRecord``), so that a model is never judged on pseudo-queries it trained on. A model
adapted with ``--hold-out 0`` trained on every document: the choice is drawn as for any model, and the
summary says the model may have trained on them.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sbert.data.beir import Document
from sbert.search.fusion import ALPHA, DEFAULT_FUSION

SPAN_WORDS = 16  # a held-out span's length, for documents without a title
MIN_WORDS = 24  # an untitled document shorter than this is never held out
QUERIES = 200  # pseudo-queries drawn by default (``--auto-queries``)
KEEP_DEFAULT_WITHIN = 1.0  # standard errors the best must be ahead of the default by, for the default to go
HOLD_OUT_SHARE = 0.1  # ``sbert adapt`` holds out by default at most this share of the documents
ADAPT_RECORD = "adapt.json"  # in an adapted model's folder: the documents it was not trained on


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
    source: Drawn | None = None  # where an adapted model's record decided which documents they came from

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
            **({"adapt_record": self.source.record()} if self.source else {}),
        }

    def summary(self) -> str:
        """One line a person reads: the choice, its score, where the pseudo-queries came from, and how far
        the choice is ahead of the next and of the default, in standard errors, worded as ``decide`` ruled."""
        best = self.best or self.choice
        chose = f"auto: chose {self.choice.name} (NDCG@10 {self.scores[self.choice.name]:.2f} on {self.queries} "
        chose += "pseudo-queries held out from the corpus" + (self.source.words() if self.source else "")
        if self.stayed_with_default and self.over_default:
            said = f"{chose}): the default way of searching, kept because the best on these pseudo-queries, "
            said += f"{best.name} ({self.scores[best.name]:.2f}), "
            if self.over_default.gap == 0:
                return f"{said}ties with it"
            return (
                f"{said}is ahead of it by {self.over_default.words()}, not more than the "
                f"{_errors(KEEP_DEFAULT_WITHIN)} it must lead by to replace the default"
            )
        said = f"{chose})"
        if self.margin:
            said += f"; the next, {self.margin.runner_up}{self._score(self.margin.runner_up)}, "
            said += self.margin.behind() + self.margin.standing()
        if self.over_default:
            over, keep = self.over_default, _errors(KEEP_DEFAULT_WITHIN)
            if self.margin is None or over.runner_up != self.margin.runner_up:
                said += f"; the default, {over.runner_up}{self._score(over.runner_up)}, {over.behind()}"
            else:
                said += "; that is the default"
            said += (
                f", more than the {keep} the best must lead it by to replace it"
                if over.ahead_by_more_than(KEEP_DEFAULT_WITHIN)
                else f", not more than {keep}, yet the best was taken: the rule that keeps the default was off"
            )
        return said

    def _score(self, name: str) -> str:
        return f" ({self.scores[name]:.2f})" if name in self.scores else ""


def _errors(count: float) -> str:
    """``count`` standard errors, in words: "one standard error", "2 standard errors"."""
    return "one standard error" if count == 1 else f"{count:g} standard errors"


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

    def words(self) -> str:
        """The gap and how many standard errors it is: "0.33, 1.4 standard errors (each 0.23)"."""
        import math

        if self.gap == 0:
            return "0.00 (a tie)"
        if math.isinf(self.standard_error):
            return f"{self.gap:.2f} (on one pseudo-query: no standard error)"
        if self.standard_error == 0:
            return f"{self.gap:.2f} (the same on every pseudo-query: standard error 0)"
        return f"{self.gap:.2f}, {self.gap / self.standard_error:.1f} standard errors (each {self.standard_error:.2f})"

    def behind(self) -> str:
        """How ``runner_up`` stands to the choice, in words: "ties with it", or "is behind by " and ``words``."""
        return "ties with it" if self.gap == 0 else f"is behind by {self.words()}"

    def standing(self) -> str:
        """What the gap says, as ``within_noise`` judges it (at most two standard errors: noise), in words that
        follow ``words``; nothing where the gap is beyond noise."""
        import math

        if self.gap == 0:
            return ": either would do as well on these pseudo-queries"
        if math.isinf(self.standard_error):
            return ": one pseudo-query cannot tell them apart"
        if self.within_noise:
            return ", not more than two, within noise: either would do about as well on these pseudo-queries"
        return ""

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
KIND = "mixed"  # the default (``--auto-query-kind``): the lowest mean gap on two collections (results/auto_kinds.md)


def held_out_queries(
    documents: Sequence[Document],
    queries: int = QUERIES,
    seed: int = 0,
    kind: str = KIND,
    only: Collection[str] | None = None,
) -> HeldOut:
    """Draw up to ``queries`` pseudo-queries of ``kind`` (``KINDS``) and the corpus without them; with ``only``
    (document ids), from those documents alone.

    The documents are visited in a seeded shuffled order and each is asked for a pseudo-query (the seed's coin
    and spans are drawn for every document visited, drawn from or not), so that ``only`` the ids an earlier
    draw of the same corpus, seed, kind and number found gives back exactly that draw."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of pseudo-query {kind!r}: expected one of {', '.join(KINDS)}")
    rng = random.Random(seed)
    order = list(range(len(documents)))
    rng.shuffle(order)
    wanted = queries if only is None else min(queries, len({d.id for d in documents} & set(only)))
    chosen: dict[int, tuple[str, Document]] = {}
    for i in order:
        if len(chosen) >= wanted:
            break
        found = KINDS[kind](documents[i], rng)
        if found is not None and (only is None or documents[i].id in only):
            chosen[i] = found
    if not chosen:
        pool = documents if only is None else [d for d in documents if d.id in only]
        raise ValueError(_none_found(pool, kind, "" if only is None else " the model's adapt.json held out"))
    corpus = [chosen[i][1] if i in chosen else d for i, d in enumerate(documents)]
    ids = {i: f"auto-{n}" for n, i in enumerate(sorted(chosen))}
    return HeldOut(
        {ids[i]: chosen[i][0] for i in sorted(chosen)}, {ids[i]: documents[i].id for i in sorted(chosen)}, corpus
    )


def _none_found(documents: Sequence[Document], kind: str, which: str) -> str:
    """Why none of ``documents`` gave a pseudo-query of ``kind``: what each kind needs, and how many have it."""
    titled = sum(1 for d in documents if d.title.strip() and d.text.split())
    long = sum(1 for d in documents if len(d.text.split()) >= MIN_WORDS)
    said = f"none of the {len(documents)} documents{which} gave a pseudo-query (--auto-query-kind {kind}): "
    span = f"a span needs a text of at least {MIN_WORDS} words, which {long} of them have"
    if kind == "span":
        return f"{said}{span}; --auto-query-kind title takes the titles of the {titled} with a title and a text"
    title = f"a title needs a document with both a title and a text, which {titled} of them have"
    if kind == "title" or not titled:
        return f"{said}{title}; {span}"
    return (
        f"{said}{title}, but the coin of --auto-query-kind mixed took a span from each of them and {span}; "
        f"--auto-query-kind title takes their titles"
    )


def held_out_ids(documents: Sequence[Document], queries: int = QUERIES, seed: int = 0, kind: str = KIND) -> set[str]:
    """The ids of the documents ``held_out_queries`` draws its pseudo-queries from (none when no document
    can give one)."""
    try:
        return set(held_out_queries(documents, queries, seed, kind).relevant.values())
    except ValueError:
        return set()


def adapt_hold_out(documents: Sequence[Document], count: int | None = None) -> list[str]:
    """The ids of the documents ``sbert adapt`` leaves out of training (sorted): those ``--auto`` draws its
    pseudo-queries from by default (seed, kind), ``count`` of them; ``None``: ``QUERIES``, or fewer where that
    is more than ``HOLD_OUT_SHARE`` of the documents (training keeps the rest); 0: none."""
    if count is None:
        count = min(QUERIES, int(HOLD_OUT_SHARE * len(documents)))
    return sorted(held_out_ids(documents, count)) if count else []


@dataclass(frozen=True)
class AdaptRecord:
    """What an adapted model's ``adapt.json`` says about the documents it trained on: ``held_out`` (ids) were
    left out of training (``adapt_hold_out``); ``hold_out`` 0: it trained on every document."""

    path: Path
    held_out: frozenset[str]
    hold_out: int

    @classmethod
    def of(cls, model: Any) -> AdaptRecord | None:
        """The record in the folder of ``model`` (an encoder loaded from a folder, or a folder), if it has one
        that reads; None for a model that was not adapted."""
        folder = getattr(model, "path", model)
        if not isinstance(folder, (str, Path)):
            return None
        path = Path(folder) / ADAPT_RECORD
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(kept, dict) or not isinstance(kept.get("held_out"), list):
            return None
        held = frozenset(str(i) for i in kept["held_out"])
        return cls(path, held, int(kept.get("hold_out") or len(held)))

    def draw_from(self, documents: Sequence[Document]) -> Drawn:
        """How ``--auto`` draws from ``documents`` for this model: from the held-out documents present."""
        present = {d.id for d in documents} & self.held_out
        return Drawn(self.path, len(self.held_out), len(present), frozenset(present), trained_on_all=not self.hold_out)


@dataclass(frozen=True)
class Drawn:
    """Where an adapted model's record (``path``) sent the draw: to ``present`` of its ``held_out`` documents
    (``only``, their ids), or, with none, to the whole corpus; ``trained_on_all``: adapted with
    ``--hold-out 0``."""

    path: Path
    held_out: int
    present: int
    only: frozenset[str]
    trained_on_all: bool = False

    @property
    def restricts(self) -> bool:
        return self.present > 0

    def words(self) -> str:
        """The clause the summary says it in."""
        if self.trained_on_all:
            return (
                f"; the model was adapted with --hold-out 0 ({self.path}), so it may have trained on the documents "
                "of these pseudo-queries, which flatters the ways of searching that use it"
            )
        if not self.restricts:
            return f"; none of the {self.held_out} documents {self.path} names as held out of training is here"
        gone = self.held_out - self.present
        missing = f" ({gone} of them not in this corpus)" if gone else ""
        return f", from the {self.present} documents adapt left out of the model's training ({self.path}){missing}"

    def record(self) -> dict[str, Any]:
        return {"path": str(self.path), "held_out": self.held_out, "present": self.present, "all": self.trained_on_all}


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
    adapted: bool = True,
) -> AutoResult:
    """Score every choice on pseudo-queries held out from ``documents`` (one in-memory index per chunking,
    with BM25) and return the best, by NDCG@10 (ties go to the earlier choice), or, with ``keep_default``,
    ``default_choice`` where the best is ahead of it by no more than ``KEEP_DEFAULT_WITHIN`` standard errors.
    With ``adapted``, an encoder loaded from a folder with an ``adapt.json`` (``AdaptRecord``) has its
    pseudo-queries drawn from the documents it was not trained on (those in ``documents``)."""
    from sbert.evaluation.ranking_metrics import ndcg_at_k
    from sbert.search.retrieve import SearchOptions, build_index, search_texts
    from sbert.windows import Chunking

    record = AdaptRecord.of(encoder) if adapted else None
    source = record.draw_from(documents) if record else None
    only = source.only if source and source.restricts else None
    held = held_out_queries(documents, queries, seed, kind, only)
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
                options = SearchOptions(k=10, hybrid=choice.hybrid, fusion=choice.fusion, alpha=choice.alpha)
                hits = search_texts(index, encoder, query_texts, options, batch_size=batch_size)
                pairs = zip(query_ids, hits, strict=True)
                found = [ndcg_at_k([h.id for h in ranked], {held.relevant[q]}, 10) for q, ranked in pairs]
                scores[choice.name], per_query[choice.name] = 100 * sum(found) / len(found), found
    titles = {d.id: d.title.strip() for d in documents}
    kinds = {"title": sum(1 for q, text in held.queries.items() if text == titles[held.relevant[q]])}
    kinds["span"] = len(held.queries) - kinds["title"]
    return AutoResult(scores=scores, queries=len(held.queries), seed=seed, kinds=kinds, drawn=kind, source=source,
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


def index_settings(result: AutoResult) -> dict[str, Any]:
    """What an index built by ``--auto`` records under ``search`` in its manifest: the search settings
    ``sbert search`` applies, and the evidence."""
    return {**result.choice.search_settings(), "auto": result.record()}


def build_auto(
    location: Any,
    encoder: Any,
    texts: Sequence[str],
    ids: Sequence[str] | None = None,
    *,
    model: str | Path,
    titles: Sequence[str | None] | None = None,
    queries: int = QUERIES,
    kind: str = KIND,
    batch_size: int = 32,
    show_progress: bool | None = None,
    report: Callable[[str], None] | None = None,
    **options: Any,
) -> tuple[Any, AutoResult]:
    """``sbert index build --auto`` and ``sbert.Index.build(auto=True)``: choose how to search ``texts`` (ids,
    titles: as ``build_index`` takes them) on pseudo-queries held out
    from them (``choose_search``: ``queries`` of ``kind``), then build the index at ``location`` (None: in
    memory; a folder) with the chosen chunking and BM25, recording the choice that search applies.
    ``report`` is given the choice's summary before the index is built. ``options``: ``build_index``'s,
    less ``chunking`` and ``bm25`` (the choice's). Returns the index and the choice."""
    from sbert.data.corpus import Corpus
    from sbert.search.index.homes import is_database_url
    from sbert.search.retrieve import build_index
    from sbert.windows import Chunking

    if options.get("chunking") is not None or options.get("bm25") is not None:
        raise ValueError("auto chooses the chunking and BM25 itself: leave out chunk and bm25")
    if location is not None and is_database_url(location):
        raise ValueError("auto applies to a folder or memory index (an index in PostgreSQL has no windows or BM25)")
    options = {key: value for key, value in options.items() if key not in ("chunking", "bm25")}
    with reusing_vectors(encoder):  # the documents the choice did not change are embedded once
        result = choose_search(
            encoder, Corpus(list(texts), ids, titles).documents(), model=str(model), queries=queries, kind=kind,
            batch_size=batch_size, show_progress=show_progress,
        )  # fmt: skip
        if report is not None:
            report(result.summary())
        built = build_index(
            location, encoder, texts, ids, model=model, chunking=Chunking() if result.choice.chunk else None,
            bm25=result.choice.hybrid, search=index_settings(result), titles=titles, batch_size=batch_size,
            show_progress=show_progress, **options,
        )  # fmt: skip
    return built, result
