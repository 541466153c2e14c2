"""``sbert.Index``: texts in, hits out, from Python, through the code ``sbert index build`` and ``sbert search`` run.

    index = sbert.Index.build(texts, ids=ids, titles=titles)        # in memory; path= a folder or a postgresql:// URL
    index.search("calc crashes when saving", k=5)                    # [Hit, ...] best first
    index.search(["query one", "query two"])                         # [[Hit, ...], [Hit, ...]]
    index.save("reports")                                            # then sbert.Index.open("reports"), `sbert search`

An ``Index`` holds a ``Searcher`` (``sbert.search.searcher``: one of the library's indexes, ``MemoryIndex``, a
folder's ``VectorIndex`` or a table's ``PgVectorIndex``, with the encoder that embeds for it); building is
``sbert.search.retrieve.build_index`` (or, with ``auto``, ``sbert.search.auto.build_auto``), opening
``open_searcher``, searching ``Searcher.search``, adding ``add_texts``: what the CLI, the service and ``sbert
eval`` call, so a Python user gets the hits they give.

Texts come as strings, or as records the way a corpus file holds them (``{"text": ..., "id": ..., "title":
...}``, a JSON line each). A title is embedded before its text, as ``sbert index build`` embeds a corpus's
(``Hit.text`` holds both; ``Hit.title`` the title).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sbert.search.base import Hit
from sbert.search.searcher import Searcher

if TYPE_CHECKING:
    from sbert.encoder import Encoder
    from sbert.windows import Chunking

__all__ = ["Hit", "Index", "corpus_of"]

_SEARCH_CALL = ("batch_size", "prompt_name", "prompt", "allow_mixed_backend")  # search_texts', not SearchOptions'
Texts = Iterable[str | Mapping[str, Any]]


class Index:
    """Texts embedded by a model, searched dense, hybrid (BM25 beside the vectors) or by documents' windows
    as the index was built. Make one with ``build`` or ``open``; ``search``, ``add``, ``save``."""

    def __init__(self, searcher: Searcher) -> None:
        """Use ``build`` or ``open``: ``searcher`` holds the index and the encoder that embeds for it."""
        self._searcher = searcher

    # -- making one ------------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        texts_or_records: Texts,
        *,
        ids: Sequence[str] | None = None,
        titles: Sequence[str | None] | None = None,
        model: str | Path | Encoder = "default",
        path: str | Path | None = None,
        auto: bool = False,
        chunk: bool | Chunking | None = None,
        bm25: bool | None = None,
        batch_size: int = 32,
        overwrite: bool = False,
        show_progress: bool | None = None,
        **index_options: Any,
    ) -> Index:
        """Embed the texts with ``model`` (a shipped name, a folder, or a loaded ``Encoder``) into a new index:
        in memory (``path`` None), in a folder, or at a ``postgresql://`` URL (``table=``).

        ``chunk``: None/False embeds each text whole (cut at the model's limit), True in windows of the model's
        length (a document's score: its best window's), a ``sbert.windows.Chunking`` as it says. ``bm25``
        None: a BM25 index beside the vectors (searched hybrid) wherever the index keeps one. ``auto``:
        choose the chunking, BM25 and fusion on pseudo-queries held out from the texts, as ``sbert index build
        --auto`` does (``auto_queries``, ``auto_kind``: ``sbert.search.auto``'s ``QUERIES`` and ``KINDS``).
        ``index_options``: ``build_index``'s (``metric``, ``ann``, ``quantization``, ``prompt_name``, ...)."""
        from sbert.search.retrieve import build_index

        ids, titles, texts = corpus_of(texts_or_records, ids, titles)
        chunking = _chunking(chunk)
        if auto and (chunking is not None or bm25 is not None):
            raise ValueError("auto chooses the chunking and BM25 itself: leave out chunk and bm25")
        encoder, name = _encoder(model)
        common: dict[str, Any] = {
            "model": name,
            "batch_size": batch_size,
            "show_progress": show_progress,
            "overwrite": overwrite,
        }
        common |= {"titles": titles, **index_options}
        if auto:
            from sbert.search.auto import QUERIES, build_auto

            queries, kind = common.pop("auto_queries", QUERIES), common.pop("auto_kind", None)
            pseudo = {"queries": queries} | ({"kind": kind} if kind else {})
            built, _ = build_auto(path, encoder, texts, ids, **pseudo, **common)
        else:
            built = build_index(path, encoder, texts, ids, chunking=chunking, bm25=bm25, **common)
        return cls(Searcher(built, encoder))

    @classmethod
    def open(
        cls, path_or_url: str | Path, *, model: str | Path | Encoder | None = None, table: str | None = None,
        **load_options: Any,
    ) -> Index:  # fmt: skip
        """The index in a folder or at a ``postgresql://`` URL (``table``, or the URL's ``#fragment``), with the
        model that embeds its queries and added texts: ``model`` (a name, a folder or a loaded ``Encoder``; it
        must be the index's), default the index's own, loaded by ``sbert.load`` with ``load_options``
        (``device``, ``backend``, ``precision``, ``allow_pickle``), as ``sbert search`` opens it."""
        from sbert.search.searcher import open_searcher

        if model is None or isinstance(model, (str, Path)):
            return cls(open_searcher(path_or_url, model=model, table=table, light=False, **load_options))
        from sbert.search.retrieve import open_index

        index = open_index(path_or_url, table=table)
        name = getattr(model, "path", None) or index.model
        index.check_encoder(name, model)
        return cls(Searcher(index, model))

    # -- using it --------------------------------------------------------------------------------------
    def search(
        self, query_or_queries: str | Sequence[str], k: int = 10, **search_options: Any
    ) -> list[Hit] | list[list[Hit]]:
        """The best ``k`` hits of one query (a list of ``Hit``, best first), or of each of several (a list of
        such lists). ``search_options``: ``SearchOptions``' (``hybrid``, ``fusion``, ``alpha``, ``mode``,
        ``rerank``: a cross-encoder or its folder, ``threshold``, ``lead``, ...; None: the index's) and
        ``batch_size``, ``prompt_name``, ``prompt``, ``allow_mixed_backend``."""
        from sbert.search.retrieve import SearchOptions
        from sbert.search.searcher import load_reranker

        one = isinstance(query_or_queries, str)
        queries: list[str] = [query_or_queries] if isinstance(query_or_queries, str) else list(query_or_queries)
        if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
            raise ValueError("search takes a query, or a list of queries: non-empty strings")
        call = {key: search_options.pop(key) for key in _SEARCH_CALL if key in search_options}
        unknown = set(search_options) - {f.name for f in fields(SearchOptions)}
        if unknown:
            raise TypeError(f"search got unknown options {sorted(unknown)}; see sbert.search.retrieve.SearchOptions")
        search_options["rerank"] = load_reranker(search_options.get("rerank"))
        options = SearchOptions(k=k, **search_options).for_index(self._searcher.index)
        hits = self._searcher.search(queries, options, **call)
        return hits[0] if one else hits

    def add(
        self, texts_or_records: Texts, *, ids: Sequence[str] | None = None, titles: Sequence[str | None] | None = None
    ) -> None:
        """Embed more texts as the index's own were (whole, or in its windows) and add them (ids: default
        numbers after the largest numeric id; a folder index is written at once)."""
        from sbert.search.retrieve import add_texts

        ids, titles, texts = corpus_of(texts_or_records, ids, titles)
        add_texts(self._searcher.index, self.model, texts, ids, titles=titles)

    def save(self, path: str | Path, *, overwrite: bool = False) -> Index:
        """Write an index in memory as a folder (``sbert.Index.open`` and ``sbert search`` read it); the
        folder's ``Index``, embedding with this one's model."""
        from sbert.backends.onnx_query import record
        from sbert.search.index.memory import MemoryIndex

        if not isinstance(self._searcher.index, MemoryIndex):
            raise ValueError(f"index {self.path} is written as it changes already: save is for an index in memory")
        saved = self._searcher.index.save(path, overwrite=overwrite)
        record(saved.path, self.model, saved.manifest)  # the torch-free query path, as build_index does
        return Index(Searcher(saved, self.model))

    # -- what it holds ---------------------------------------------------------------------------------
    @property
    def model(self) -> Encoder:
        """The encoder that embeds queries and added texts."""
        return self._searcher.encoder

    @property
    def dim(self) -> int:
        return self._searcher.index.dim

    @property
    def path(self) -> str | Path | None:
        """The folder or URL the index lives in; None in memory."""
        from sbert.search.index.memory import MemoryIndex

        index = self._searcher.index
        return None if isinstance(index, MemoryIndex) else index.path

    @property
    def ids(self) -> list[str]:
        """The live ids: documents' in an index built with ``chunk``, else the texts'."""
        index: Any = self._searcher.index
        if index.documents:
            return list(index.document_ids)
        dead = set(index.deleted.tolist())
        return [i for r, i in enumerate(index.ids) if r not in dead]

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        where = "memory" if self.path is None else str(self.path)
        index = self._searcher.index
        return f"Index({len(self)} {'documents' if index.documents else 'texts'}, {index.model}, {where})"


def _encoder(model: str | Path | Encoder) -> tuple[Any, str | Path]:
    """(encoder, the name an index records) for a shipped name, a folder or a loaded encoder."""
    if isinstance(model, (str, Path)):
        import sbert

        return sbert.load(model), model
    if not hasattr(model, "encode_document"):
        raise TypeError(f"model must be a name, a folder or an sbert Encoder, got {type(model).__name__}")
    folder = getattr(model, "path", None)
    if folder is None:
        raise ValueError("the model must have been loaded from a folder or a name (sbert.load), which an index records")
    return model, _shipped_name(Path(folder))


def _shipped_name(folder: Path) -> str | Path:
    """The shipped name of the model in ``folder`` (what an index then records), else the folder."""
    from sbert.model_names import known_names, resolve

    for name in known_names():
        with contextlib.suppress(Exception):
            if resolve(name).resolve() == folder.resolve():
                return name
    return folder


def _chunking(chunk: bool | Chunking | None) -> Chunking | None:
    """None (whole texts), the model's windows (True) or the ``Chunking`` given."""
    from sbert.windows import Chunking

    if chunk is None or chunk is False:
        return None
    if chunk is True:
        return Chunking()
    if not isinstance(chunk, Chunking):
        raise TypeError(f"chunk must be None, True, False or a sbert.windows.Chunking, got {type(chunk).__name__}")
    return chunk


def corpus_of(
    texts_or_records: Texts, ids: Sequence[str] | None = None, titles: Sequence[str | None] | None = None
) -> tuple[list[str] | None, list[str | None] | None, list[str]]:
    """(ids, titles, texts) as ``sbert index build`` reads them from a corpus file: from strings, or records
    with a ``text`` (and ``id``/``_id``, ``title``); titles stripped (None where a text has none; None
    altogether where none has one), texts as given. ``ids``/``titles``, one per text, are given beside strings instead.
    Raises ValueError on no texts, an empty text, a record without a text, lengths that differ, ids given
    twice or for some records only."""
    if isinstance(texts_or_records, (str, bytes, Mapping)):
        raise TypeError("give a list of texts (or of records), not one")
    items = list(texts_or_records)
    if not items:
        raise ValueError("no texts to index")
    found_ids, found_titles, bodies = _fields_of(items)
    for name, given, found in (("ids", ids, found_ids), ("titles", titles, found_titles)):
        if given is not None and any(f is not None for f in found):
            raise ValueError(f"{name} given both in the records and as {name}=: give them once")
        if given is not None and len(given) != len(items):
            raise ValueError(f"{len(given)} {name} for {len(items)} texts")
    row_ids: list[str | None] = [str(i) for i in ids] if ids is not None else found_ids
    if any(i is not None for i in row_ids) and any(i is None for i in row_ids):
        missing = sum(i is None for i in row_ids)
        raise ValueError(f"{missing} of {len(items)} records have no id; give all or none")
    kept = [t.strip() if isinstance(t, str) and t.strip() else None for t in (titles or found_titles)]
    _check_ids(row_ids)
    no_ids = all(i is None for i in row_ids)
    return None if no_ids else row_ids, kept if any(t is not None for t in kept) else None, bodies  # type: ignore


def _fields_of(items: list) -> tuple[list[str | None], list[Any], list[str]]:
    """Each item's id, title and text (strings: the text alone); an item without a text string raises."""
    ids: list[str | None] = []
    titles: list[Any] = []
    texts: list[str] = []
    for n, item in enumerate(items):
        record = {"text": item} if isinstance(item, str) else item
        if not isinstance(record, Mapping) or not isinstance(record.get("text"), str):
            has = f"its fields: {', '.join(map(repr, record))}" if isinstance(record, Mapping) else type(item).__name__
            raise ValueError(f"text {n}: expected a string, or a record with a string 'text' ({has})")
        if not record["text"].strip() and not (isinstance(record.get("title"), str) and record["title"].strip()):
            raise ValueError(f"text {n} is empty; expected a non-empty text")
        found = record.get("id", record.get("_id"))
        ids.append(None if found in (None, "") else str(found))
        titles.append(record.get("title"))
        texts.append(record["text"])
    return ids, titles, texts


def _check_ids(ids: list[str | None]) -> None:
    seen: dict[str, int] = {}
    for n, found in enumerate(ids):
        if found is not None and seen.setdefault(found, n) != n:
            raise ValueError(f"text {n}: id {found!r} was already given to text {seen[found]}; expected each id once")
