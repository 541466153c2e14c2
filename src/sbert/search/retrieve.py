"""The one retrieval path: texts into an index, query texts into ranked hits.

``sbert index build``/``add``, ``sbert search``, the service's ``/search`` and ``sbert eval``'s retrieval
all go through these functions, so that what is measured is what is served:

    texts --embed_corpus--> rows (whole texts, or windows by a ``Chunking``) --build_index/add_texts--> Index
    queries --encode_query--> vectors --Index.search (dense, maxp/mean, hybrid BM25)--> hits --rerank--> hits

An index (``BaseIndex``, ``sbert.search.index.base``) is any of ``VectorIndex`` (a folder), ``PgVectorIndex``
(PostgreSQL) or ``MemoryIndex`` (``location=None``); ``open_index`` opens the first two from a folder or a
``postgresql://`` URL. Which class lives at a location is ``sbert.search.index.homes``;
``sbert.search.searcher.open_searcher`` opens an index with the model that embeds its queries.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sbert.errors import SbertError
from sbert.search.base import Hit, Hybrid
from sbert.search.fusion import ALPHA, CANDIDATES, DEFAULT_FUSION, FUSIONS
from sbert.search.index.base import BaseIndex
from sbert.search.index.homes import index_class, is_database_url

if TYPE_CHECKING:
    from sbert.search.index.query import Documents
    from sbert.windows import Chunking

__all__ = [
    "BM25",
    "LEAD_HITS",
    "EmbeddedCorpus",
    "SearchOptionError",
    "SearchOptions",
    "add_texts",
    "build_index",
    "embed_corpus",
    "hit_lead",
    "index_summary",
    "lead",
    "open_index",
    "search_texts",
]


BM25 = True  # the default: keep BM25 beside the vectors, where hybrid search gained over dense on both collections


def open_index(location: str | Path, *, table: str | None = None, **options: Any) -> BaseIndex:
    """The index at ``location``: a ``PgVectorIndex`` for a ``postgresql://`` URL (``table``, or the URL's
    ``#fragment``), else the ``VectorIndex`` folder (``sbert.search.index.homes``). ``options`` go to the folder
    index's ``open``."""
    return index_class(location).open_at(location, table=table, **options)


def index_summary(index: BaseIndex) -> dict[str, Any]:
    """What ``index`` holds (``sbert index info``): rows (and deleted rows), model, backend, dimension,
    metric, its search structures and default method, segments, documents (their chunking and count; None
    for an index of whole texts) and whether it keeps BM25."""
    return {
        "rows": len(index),
        "deleted": len(index.deleted),
        "model": index.model,
        "backend": index.backend,
        "dim": index.dim,
        "metric": index.metric,
        "structures": index.manifest["structures"],
        "default_method": index.default_method(),
        "segments": len(index.manifest["segments"]),
        "documents": index.documents and {**index.documents, "count": len(index.document_ids)},
        "bm25": index.lexical,
    }


# -- texts into rows ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EmbeddedCorpus:
    """Texts made into an index's rows: ``embeddings`` (n_rows, dim), row ``ids`` (None: the index names
    them; windows are ``<document id>#<n>``), row ``texts`` (what was embedded and is searched: each title
    before its text; passages of that for windows) and ``documents`` (windows of documents) or None."""

    embeddings: np.ndarray
    ids: list[str] | None
    texts: list[str]
    documents: Documents | None = None
    titles: list[str | None] | None = None  # each row's title (a window's: its document's), or None


def embed_corpus(
    encoder: Any,
    texts: Sequence[str],
    ids: Sequence[str] | None = None,
    *,
    chunking: Chunking | None = None,
    batch_size: int = 32,
    show_progress: bool | None = None,
    prompt_name: str | None = None,
    prompt: str | None = None,
    titles: Sequence[str | None] | None = None,
) -> EmbeddedCorpus:
    """Embed ``texts`` as an index keeps them: whole, with the model's document prompt (``encode_document``,
    cut at the model's limit), or, with ``chunking``, window by window (``sbert.windows``). A
    ``prompt_name``/``prompt`` chooses another prompt than the model's document prompt. ``titles`` (one per
    text, or None; e.g. ``sbert.data.corpus.read_corpus``'s): each is embedded before its text
    (``sbert.data.beir.joined``) and kept beside the rows."""
    from sbert.data.beir import joined

    if titles is not None and len(titles) != len(texts):
        raise ValueError(f"{len(titles)} titles for {len(texts)} texts")
    texts = list(texts) if titles is None else [joined(t, x) for t, x in zip(titles, texts, strict=True)]
    if chunking is None:
        embeddings = encoder.encode_document(
            texts,
            batch_size=batch_size,
            show_progress=show_progress,
            on_truncation="ignore",
            prompt_name=prompt_name,
            prompt=prompt,
        )
        kept_ids = None if ids is None else [str(i) for i in ids]
        return EmbeddedCorpus(np.asarray(embeddings), kept_ids, texts, titles=None if titles is None else list(titles))
    from sbert.search.index.query import Documents

    ids = [str(i) for i in ids] if ids is not None else [str(i) for i in range(len(texts))]
    resolved = chunking.resolved(encoder, prompt_name, prompt)
    encoded = resolved.embed(encoder, texts, batch_size, show_progress)
    documents = Documents.of(encoded, ids, resolved)
    by_document = dict(zip(ids, titles, strict=True)) if titles is not None else None
    row_titles = None if by_document is None else [by_document[str(d)] for d in documents.ids]
    return EmbeddedCorpus(encoded.vectors, None, encoded.passages, documents, row_titles)


def build_index(
    location: str | Path | None,
    encoder: Any,
    texts: Sequence[str],
    ids: Sequence[str] | None = None,
    *,
    model: str | Path,
    chunking: Chunking | None = None,
    bm25: bool | None = None,
    batch_size: int = 32,
    show_progress: bool | None = None,
    prompt_name: str | None = None,
    prompt: str | None = None,
    table: str | None = None,
    overwrite: bool = False,
    titles: Sequence[str | None] | None = None,
    **options: Any,
) -> BaseIndex:
    """A new index of ``texts`` embedded by ``encoder`` (``model``: its name or folder, as recorded):
    in memory (``location`` None: a ``MemoryIndex``), in a folder, or in PostgreSQL (a ``postgresql://``
    URL; ``table``). ``options``: the index class's own (``metric``, ``ann``, ``quantization``, ...). The
    target is checked before anything is embedded. ``titles`` (one per text): embedded before their texts and
    returned in ``Hit.title``. ``bm25`` None: a BM25 index beside the vectors wherever the index keeps one
    (memory, a folder; searched hybrid by default: ``SearchOptions``), none in PostgreSQL. A folder index
    records the encoder's ``truncate_dim`` (``add`` and ``search`` then cut alike)."""
    if bm25 is None:
        bm25 = BM25 and not is_database_url(location)
    if location is not None and not is_database_url(location):
        options.setdefault("truncate_dim", getattr(encoder, "truncate_dim", None))
    home = index_class(location)
    target = home.check_location(location, table=table, overwrite=overwrite, chunking=chunking, bm25=bm25, **options)
    corpus = embed_corpus(
        encoder, texts, ids, chunking=chunking, batch_size=batch_size, show_progress=show_progress,
        prompt_name=prompt_name, prompt=prompt, titles=titles,
    )  # fmt: skip
    backend = getattr(encoder, "runtime", None)
    common = {"model": model, "ids": corpus.ids, "texts": corpus.texts, "backend": backend, **options}
    common["titles"] = corpus.titles  # kept by folder and memory indexes; PostgreSQL has them in the text
    if chunking is None and hasattr(encoder, "resolve_prompt"):  # windows record theirs in their Chunking
        common["document_prompt"] = encoder.resolve_prompt(prompt_name, prompt, task="document") or ""
    return home.build_at(
        target, corpus.embeddings, encoder=encoder, overwrite=overwrite, show_progress=show_progress,
        documents=corpus.documents, bm25=bm25, **common,
    )  # fmt: skip


def add_texts(
    index: BaseIndex,
    encoder: Any,
    texts: Sequence[str],
    ids: Sequence[str] | None = None,
    *,
    batch_size: int = 32,
    show_progress: bool | None = None,
    prompt_name: str | None = None,
    prompt: str | None = None,
    allow_mixed_backend: bool = False,
    titles: Sequence[str | None] | None = None,
) -> None:
    """Embed ``texts`` as the index's own rows were (an index of documents: split with its recorded
    ``Chunking``), with the document prompt it was built with (``document_prompt``; a ``prompt_name``/
    ``prompt`` that gives another is refused), and add them; ids default to numbers after the largest
    numeric id."""
    from sbert.windows import Chunking

    recorded = document_prompt(index)
    if recorded is not None:
        check_prompt(index, encoder, "document", prompt_name, prompt)
        prompt_name, prompt = None, (None if index.documents else recorded)  # windows: their Chunking's
    chunking = Chunking.of(index.documents) if index.documents else None
    if chunking is not None and ids is None:
        from sbert.search.index.base import next_ids

        ids = next_ids(index.document_ids, len(texts))
    backend = getattr(encoder, "runtime", None)
    index.check_backend(backend, allow_mixed_backend)  # before the costly encoding; again under the lock
    corpus = embed_corpus(
        encoder,
        texts,
        ids,
        chunking=chunking,
        batch_size=batch_size,
        show_progress=show_progress,
        prompt_name=prompt_name,
        prompt=prompt,
        titles=titles,
    )
    options = {"documents": corpus.documents} if corpus.documents is not None else {}
    if corpus.titles is not None and "titles" in inspect.signature(index.add).parameters:
        options["titles"] = corpus.titles  # folder and memory indexes keep titles; PostgreSQL in the text
    index.add(
        corpus.embeddings,
        ids=corpus.ids,
        texts=corpus.texts,
        show_progress=show_progress,
        backend=backend,
        allow_mixed_backend=allow_mixed_backend,
        **options,
    )


# -- the prompts an index was built with ------------------------------------------------------------------
def document_prompt(index: BaseIndex) -> str | None:
    """The document prompt the index's rows were embedded with, as text ("": none); None where the index
    does not record it (built before indexes recorded it, or in PostgreSQL)."""
    documents = index.documents
    if documents:
        return documents.get("prompt")
    return index.manifest.get("document_prompt") if hasattr(index, "manifest") else None


def check_prompt(index: BaseIndex, encoder: Any, role: str, prompt_name: str | None, prompt: str | None) -> None:
    """Refuse a ``prompt_name``/``prompt`` that conflicts with the document prompt ``index`` was built with:
    for ``role`` "document" (adding texts) any prompt other than it; for "query" (searching) the document
    prompt itself where the model's query prompt differs (queries embedded as if they were documents)."""
    recorded = document_prompt(index)
    if recorded is None or (prompt_name is None and prompt is None):
        return
    chosen = encoder.resolve_prompt(prompt_name, prompt, task=role) or ""
    given = f"prompt {prompt!r}" if prompt is not None else f"prompt_name {prompt_name!r} ({chosen!r})"
    where = getattr(index, "path", None) or getattr(index, "table", "")
    if role == "document" and chosen != recorded:
        raise ValueError(
            f"index {where} was built with the document prompt {recorded!r}; the {given} would embed these "
            "texts unlike its rows: leave out prompt_name and prompt (--prompt-name, --prompt) to use the index's"
        )
    model_query = encoder.resolve_prompt(task="query") or ""
    if role == "query" and recorded and chosen == recorded and model_query != recorded:
        raise ValueError(
            f"the {given} is the document prompt index {where} was built with: queries take the query prompt "
            f"({model_query!r}); leave out prompt_name and prompt (--prompt-name, --prompt) to use it"
        )


# -- queries into hits -------------------------------------------------------------------------------------
class SearchOptionError(SbertError, ValueError):
    """Search options out of range or that do not go together; ``option`` names the one at fault."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How to search: the best ``k``; ``mode`` (an index of documents: ``maxp``/``mean``, default the
    index's); ``hybrid`` BM25 fused by ``fusion`` (``alpha``: the dense side's weight); ``rerank``, a
    one-label cross-encoder (``PairScorer``) re-scoring the first stage's best ``candidates`` (also the
    results each side gives the fusion); ``method``, ``ef_search``, ``rescore``: the index structure's;
    ``threshold``: keep only hits whose ``cosine`` is at least this ("is this already here?"); ``lead``: keep
    only the top hit, and only where its ``lead`` (how far its cosine stands above the next hits') is at
    least this ("is the top hit the duplicate?"). Both compare cosines, never a fused or re-ranked score,
    which ranks one query's hits and means nothing across queries; ``sbert eval --triage`` chooses both on a
    dense search's hits, and a search given either is dense unless ``hybrid`` is asked for.

    ``hybrid``, ``fusion`` and ``alpha`` left None are the index's (``for_index``): what it recorded when
    built with ``--auto``, else hybrid (weighted, ``ALPHA``) where it keeps BM25 and dense where it does
    not, or dense with a ``threshold`` or a ``lead``. A ``k`` (or ``candidates``) beyond what the index
    holds returns all it holds. Given by keyword only; a ``SearchOptionError`` (a ``ValueError``) names the
    option at fault."""

    k: int = 10
    mode: str | None = None
    hybrid: bool | None = None
    fusion: str | None = None
    alpha: float | None = None
    candidates: int = CANDIDATES
    rerank: Any = None
    method: str | None = None
    ef_search: int | None = None
    rescore: int | None = None
    threshold: float | None = None
    lead: float | None = None

    def __post_init__(self) -> None:
        for name in ("threshold", "lead"):
            if getattr(self, name) is not None and not math.isfinite(getattr(self, name)):
                raise SearchOptionError(name, f"{name} must be a finite number, got {getattr(self, name)}")
        if self.lead is not None and self.rerank is not None:
            raise SearchOptionError(
                "lead", "lead is a dense search's cosine margin: it does not apply to re-ranked scores"
            )
        if self.k < 1 or self.candidates < 1:
            raise SearchOptionError(
                "k" if self.k < 1 else "candidates",
                f"k and candidates must be at least 1, got {self.k} and {self.candidates}",
            )
        if self.fusion is not None and self.fusion not in FUSIONS:
            raise SearchOptionError("fusion", f"fusion must be one of {', '.join(FUSIONS)}, got {self.fusion!r}")
        if self.alpha is not None and not 0 <= self.alpha <= 1:
            raise SearchOptionError("alpha", f"alpha must be from 0 to 1, got {self.alpha}")

    def for_index(self, index: BaseIndex) -> SearchOptions:
        """These options with ``hybrid``, ``fusion`` and ``alpha`` settled for ``index`` (see the class)."""
        recorded = recorded_search(index.manifest or {})
        hybrid = self.hybrid
        if hybrid is None:  # a threshold or a lead is a cosine: only a dense search's scores are
            cosine = self.threshold is not None or self.lead is not None
            hybrid = not cosine and recorded.get("hybrid", bool(index.lexical))
        fusion = self.fusion or recorded.get("fusion", DEFAULT_FUSION)
        alpha = self.alpha if self.alpha is not None else recorded.get("alpha", ALPHA)
        return replace(self, hybrid=hybrid, fusion=fusion, alpha=alpha)


def recorded_search(manifest: dict) -> dict[str, Any]:
    """The search settings an index recorded (built with ``--auto``): hybrid, fusion, alpha; {} when none."""
    found = manifest.get("search") or {}
    return {key: found[key] for key in ("hybrid", "fusion", "alpha") if key in found}


def search_texts(
    index: BaseIndex,
    encoder: Any,
    queries: Sequence[str],
    options: SearchOptions = SearchOptions(),
    *,
    batch_size: int = 32,
    prompt_name: str | None = None,
    prompt: str | None = None,
    allow_mixed_backend: bool = False,
    on_truncation: str = "warn",
) -> list[list[Hit]]:
    """Each query's hits: embedded as ``encode_query`` does (or with ``prompt_name``/``prompt``, refused
    where it is the index's document prompt and not the model's query prompt: see ``check_prompt``), then
    ``search_vectors``."""
    check_prompt(index, encoder, "query", prompt_name, prompt)
    queries = list(queries)
    vectors = encoder.encode_query(
        queries, batch_size=batch_size, prompt_name=prompt_name, prompt=prompt, on_truncation=on_truncation
    )
    backend = getattr(encoder, "runtime", None)
    return search_vectors(index, vectors, queries, options, backend=backend, allow_mixed_backend=allow_mixed_backend)


def search_vectors(
    index: BaseIndex,
    vectors: Any,
    queries: Sequence[str],
    options: SearchOptions = SearchOptions(),
    *,
    backend: str | None = None,
    allow_mixed_backend: bool = False,
) -> list[list[Hit]]:
    """Each query's best ``options.k`` hits for its embedding (``vectors``) and text (``queries``: for
    BM25 and re-ranking): the index's search, then the cross-encoder's re-ranking of the candidates."""
    from sbert.search.rerank import rerank

    options = options.for_index(index)
    fetch = max(options.k, options.candidates) if options.rerank is not None else options.k
    fetch = max(fetch, LEAD_HITS) if options.lead is not None else fetch
    hybrid = Hybrid(queries, options.fusion, options.alpha, candidates=options.candidates) if options.hybrid else None
    hits = index.search(
        vectors,
        fetch,
        method=options.method,
        ef_search=options.ef_search,
        rescore=options.rescore,
        backend=backend,
        allow_mixed_backend=allow_mixed_backend,
        mode=options.mode,
        hybrid=hybrid,
    )
    if options.rerank is not None:
        hits = [rerank(options.rerank, q, found, options.k) for q, found in zip(queries, hits, strict=True)]
    if options.lead is not None:
        hits = [_stands_out(found, options.lead) for found in hits]
    if options.threshold is None:
        return hits
    return [[h for h in found if cosine(h) >= options.threshold] for found in hits]


LEAD_HITS = 10  # the top hit's lead is over the hits ranked 2 to 10


def cosine(hit: Hit) -> float:
    """The hit's cosine, what ``threshold`` and ``lead`` compare (every index's hits carry it)."""
    if hit.cosine is None:
        raise ValueError(f"hit {hit.id!r} has no cosine: threshold and lead compare the cosines an index's hits carry")
    return hit.cosine


def hit_lead(found: Sequence[Hit]) -> float:
    """``lead`` of a query's hits (best first): by their cosines, whatever ranked them."""
    return lead([cosine(h) for h in found[:LEAD_HITS]])


def _stands_out(found: list[Hit], least: float) -> list[Hit]:
    """The top hit alone, carrying its lead, where that lead is at least ``least``; else no hit."""
    if not found:
        return []
    value = hit_lead(found)
    return [found[0]._replace(lead=value)] if value >= least else []


def lead(scores: Sequence[float]) -> float:
    """How far a query's top hit stands out: its cosine minus the mean cosine of the hits ranked 2 to
    ``LEAD_HITS`` (as many as there are; ``scores``: the hits' cosines, in their order). ``inf`` with no
    second hit.

    On openoffice-dups (docs/triage.md, benchmarks/triage.py), whether the top hit is the duplicate
    is told far better by its lead than by its cosine: the cosines of one report's hits sit on a scale of
    their own."""
    scores = list(scores)
    if not scores:
        raise ValueError("lead needs at least one hit")
    rest = scores[1:LEAD_HITS]
    return float(scores[0] - sum(rest) / len(rest)) if rest else math.inf
