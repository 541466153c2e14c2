"""How an index answers queries: rows or documents, by dense vectors alone or fused with BM25.

In an index of documents (built from ``sbert.windows`` windows) every row is a window and records
its document; a search returns documents, each scored by its best window (``maxp``: the structure's
best windows are fetched, more and more, until ``k`` documents are among them) or by the mean of its
windows' vectors (``mean``: an exact search over the documents' mean vectors, computed once per
version), each with its best passage: the window closest to the query.

With ``Hybrid``, BM25 results are fused with the dense ones (``sbert.search.fusion``). In an index of
documents BM25 scores WHOLE documents (each reassembled from its windows' passages: the text that was
embedded, e.g. title + text), and the fusion happens at the document level, after MaxP/mean grouping:
what benchmarks/retrieval.py measures (benchmarks/results/retrieval.md). The BM25 index is
built by ``lexical_index``, here, for the folder and the memory index alike. Indexes of documents
written before this (manifest ``lexical`` without ``"over": "documents"``) keep BM25 per window and score
a document by its best window's BM25; they open and search as before, and keep that until rebuilt
(``sbert index build`` again).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sbert.search import ranking
from sbert.search.base import Hit, Hybrid
from sbert.search.exact import TopK, pair_scores, semantic_search
from sbert.search.fusion import fuse
from sbert.search.grouping import DEFAULT_MODE, Groups, check_mode, readable_passage
from sbert.search.lexical import BM25

if TYPE_CHECKING:
    from sbert.search.index.store import Snapshot
    from sbert.windows import Chunking, EncodedDocuments

Rows = Callable[[int], TopK]  # the structure's best ``n`` live rows for the queries


@dataclass(frozen=True)
class Documents:
    """Rows that are windows of documents: the document ``ids`` (one per row), each row's character
    ``spans`` (rows, 2), and how the documents were split (``window``, ``overlap``, ``prompt``, at most
    ``max_windows`` each) and are scored (``mode``): an index records these (``settings``) and splits later
    documents the same way."""

    ids: Sequence[str]
    spans: np.ndarray
    window: int
    overlap: int
    mode: str = DEFAULT_MODE
    prompt: str | None = None
    max_windows: int | None = None

    @classmethod
    def of(
        cls,
        encoded: EncodedDocuments,
        doc_ids: Sequence[str],
        window: int | Chunking,
        overlap: int | None = None,
        mode: str = DEFAULT_MODE,
    ) -> Documents:
        """The rows of ``encode_documents``' result, whose documents have ids ``doc_ids`` (one per document),
        split as ``window`` says: a resolved ``Chunking`` (``Chunking.resolved``), or window and overlap."""
        if len(set(doc_ids)) != len(doc_ids):
            raise ValueError(f"document ids must be unique; repeated: {_repeated(doc_ids)}")
        prompt = max_windows = None
        if not isinstance(window, int):
            chunking = window
            window, overlap, mode, prompt = chunking.window, chunking.overlap, chunking.mode, chunking.prompt
            max_windows = chunking.max_windows
        if window is None or overlap is None:
            raise ValueError("Documents.of needs the window and overlap the documents were split with")
        ids = [str(doc_ids[d]) for d in encoded.doc.tolist()]
        return cls(ids, encoded.spans, window, overlap, check_mode(mode), prompt, max_windows)

    def settings(self) -> dict:
        out = {"window": self.window, "overlap": self.overlap, "mode": check_mode(self.mode)}
        out = out if self.prompt is None else {**out, "prompt": self.prompt}
        return out if self.max_windows is None else {**out, "max_windows": self.max_windows}


DocumentGroups = Groups  # the live documents of a version (``sbert.search.grouping``)


def _repeated(ids: Sequence[str]) -> str:
    """The ids that occur more than once (the first five), for an error message."""
    dupes = [i for i, count in Counter(ids).items() if count > 1]
    return f"{dupes[:5]}{' ...' if len(dupes) > 5 else ''}"


def groups(snap: Snapshot) -> Groups:
    """The live documents of ``snap`` (computed once per version)."""

    def make() -> Groups:
        alive = np.ones(len(snap.ids), dtype=bool)
        alive[snap.deleted] = False
        return Groups.of(snap.docs, alive)

    return snap.derived("documents", make)


# -- searching ----------------------------------------------------------------------------------------------
def search(snap: Snapshot, q: np.ndarray, k: int, rows: Rows, mode: str | None, hybrid: Hybrid | None, bm25) -> list:
    """Each query's best ``k`` hits (``Hit``, each with its ``cosine``) from version ``snap``: rows, or
    documents in an index of documents; ``q``: (n, dim) queries as the index keeps vectors; ``rows``: the
    structure's search. ``k`` and the candidates of a hybrid search beyond what the index holds are cut to
    it: every array here is at most as wide as the index."""
    documents = snap.manifest.get("documents")
    size = max(1, searchable(snap))
    k = min(k, size)
    wide = k if hybrid is None else min(max(k, hybrid.candidates), size)
    mean = documents is not None and check_mode(mode or documents["mode"]) == "mean"
    if documents is None:
        found = rows(wide)
    elif not mean:
        found = _maxp(snap, wide, rows)
    else:
        found = _pad(semantic_search(q, _means(snap), wide, score="dot"), wide)
    if hybrid is not None:
        if len(hybrid.texts) != len(q):
            raise ValueError(f"{len(hybrid.texts)} query texts for {len(q)} query vectors")
        lexical = _lexical(snap, bm25, hybrid.texts, wide, documents is not None)
        found = fuse(found, lexical, k, hybrid.fusion, hybrid.alpha, hybrid.rrf_k)
    per_query = zip(q, found.scores, found.indices, strict=True)
    if documents is None:
        return [_row_hits(snap, query, list(_live(*one))) for query, *one in per_query]
    return [[_document_hit(snap, query, int(g), float(s), mean) for s, g in _live(*one)] for query, *one in per_query]


def searchable(snap: Snapshot) -> int:
    """What a search of ``snap`` can return at most: its live documents in an index of documents, else its live rows."""
    if snap.manifest.get("documents"):
        return len(groups(snap).names)
    return len(snap.ids) - len(snap.deleted)


def cosines(snap: Snapshot, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The cosine similarity of ``query`` (as the index keeps queries) and each of ``rows``' vectors (or of
    (m, dim) vectors given as ``rows``), float64 pair by pair as exact search re-scores, as float32: equal to
    an exact dense search's score in an index whose metric is cosine."""
    vectors = snap.vectors[rows] if rows.ndim == 1 and rows.dtype.kind in "iu" else rows
    unit_length = snap.manifest["metric"] == "cosine"  # rows and queries are kept at unit length
    return pair_scores(query[None], vectors[None], "dot" if unit_length else "cosine")[0].astype(np.float32)


def _row_hits(snap: Snapshot, query: np.ndarray, found: list) -> list[Hit]:
    """The hits of an index of texts for (score, row) pairs ``found``, best first."""
    rows = np.array([int(r) for _, r in found], dtype=np.int64)
    cosine = cosines(snap, query, rows) if len(rows) else []
    return [
        Hit(snap.ids[r], float(s), snap.texts[r], int(r), title=_title(snap, r), cosine=float(c))
        for (s, r), c in zip(found, cosine, strict=True)
    ]


def _means(snap: Snapshot) -> np.ndarray:
    """Each live document's mean window vector (unit length for cosine), computed once per version."""
    return snap.derived("means", lambda: groups(snap).means(snap.vectors, snap.manifest["metric"] == "cosine"))


def _live(scores: np.ndarray, ids: np.ndarray):
    return ((s, i) for s, i in zip(scores, ids, strict=True) if i >= 0)


def _maxp(snap: Snapshot, k: int, rows: Rows) -> TopK:
    """Each query's best ``k`` documents by their best window: more windows are fetched until ``k``
    documents (or all) are among them; a document's score is its first (best) window's."""
    docs = groups(snap)
    live = len(snap.ids) - len(snap.deleted)
    k = max(1, min(k, len(docs.names)))
    want, fetch = min(k, len(docs.names)), min(max(4 * k, k + 16), live)
    while True:
        found = rows(max(fetch, 1))
        of = np.where(found.indices >= 0, docs.of_row[np.maximum(found.indices, 0)], -1)
        if fetch >= live or all(len(np.unique(d[d >= 0])) >= want for d in of):
            break
        fetch = min(fetch * 4, live)
    scores = np.full((len(of), k), -np.inf, dtype=np.float32)
    ids = np.full((len(of), k), -1, dtype=np.int64)
    for n, (row_scores, row_docs) in enumerate(zip(found.scores, of, strict=True)):
        keep = row_docs >= 0
        unique, first = np.unique(row_docs[keep], return_index=True)
        best_scores, best_docs = ranking.top(row_scores[keep][first][None], unique[None], k)
        scores[n, : best_docs.shape[1]], ids[n, : best_docs.shape[1]] = best_scores[0], best_docs[0]
    return TopK(scores, ids)


def _lexical(snap: Snapshot, bm25: BM25, texts: Sequence[str], k: int, documents: bool) -> TopK:
    """BM25's best ``k`` live rows per query text, or documents: whole documents (``lexical_index``), or in an
    older index of documents, each scored by its best window's BM25."""
    if not documents:
        return bm25.search(texts, k, exclude=snap.deleted)
    docs = groups(snap)
    k = max(1, min(k, len(docs.names)))
    if bm25.keys is not None:  # one BM25 row per document, keyed by its id; deleted ones map to -1
        number = {name: g for g, name in enumerate(docs.names)}
        to_group = np.array([number.get(key, -1) for key in bm25.keys], dtype=np.int64)
    scores = np.full((len(texts), k), -np.inf, dtype=np.float32)
    ids = np.full((len(texts), k), -1, dtype=np.int64)
    for n, text in enumerate(texts):
        per_doc = np.zeros(len(docs.names), dtype=np.float32)
        if bm25.keys is not None:
            live = to_group >= 0
            per_doc[to_group[live]] = bm25.scores(text)[live]
        else:
            live = docs.of_row >= 0
            np.maximum.at(per_doc, docs.of_row[live], bm25.scores(text)[live])
        found = np.flatnonzero(per_doc > 0)
        best_scores, best_docs = ranking.top(per_doc[found][None], found[None], k)
        scores[n, : best_docs.shape[1]], ids[n, : best_docs.shape[1]] = best_scores[0], best_docs[0]
    return TopK(scores, ids)


# -- the BM25 index ---------------------------------------------------------------------------------------
OVER_DOCUMENTS = {"over": "documents"}  # manifest["lexical"] of an index of documents: BM25 over whole documents


def plan_lexical(documents: bool) -> dict:
    """A new index's manifest ``lexical`` entry (its file is added when written)."""
    return dict(OVER_DOCUMENTS) if documents else {}


def lexical_index(
    manifest: dict,
    texts: Sequence[str | None] | None,
    docs: Sequence[str] | None = None,
    spans: Sequence | None = None,
    deleted: np.ndarray | None = None,
) -> BM25:
    """The BM25 index an index keeps for hybrid search: over its rows' ``texts``; in an index of documents
    (``manifest["lexical"]["over"] == "documents"``) over its live documents, each one text reassembled
    from its windows (``docs``: each row's document, ``spans``: its character span; rows in ``deleted``
    left out), keyed by document id."""
    if texts is None or any(t is None for t in texts):
        raise ValueError("a BM25 index needs the rows' texts; give texts")
    if (manifest.get("lexical") or {}).get("over") != "documents" or not manifest.get("documents"):
        return BM25.build(texts)
    if docs is None or spans is None:
        raise ValueError("a BM25 index over documents needs each row's document and span")
    alive = np.ones(len(texts), dtype=bool)
    if deleted is not None and len(deleted):
        alive[np.asarray(deleted, dtype=np.int64)] = False
    found = Groups.of(docs, alive)
    whole = [reassemble([texts[r] for r in rows.tolist()], [spans[r] for r in rows.tolist()]) for rows in found.rows]
    return BM25.build(whole, keys=found.names)


def reassemble(passages: Sequence[str], spans: Sequence) -> str:
    """A document's text from its windows' ``passages`` and their character ``spans`` (overlaps agree;
    characters no window covers, only ever white space between tokens, become spaces)."""
    end = max((int(b) for _, b in spans), default=0)
    chars = [" "] * end
    for passage, (a, _) in zip(passages, spans, strict=True):
        chars[int(a) : int(a) + len(passage)] = passage
    return "".join(chars)


def _document_hit(snap: Snapshot, query: np.ndarray, group: int, score: float, mean: bool = False) -> Hit:
    """Document ``group``'s hit: its best passage is its window closest to ``query``; its cosine, that
    window's (``mean``: the document's mean vector's)."""
    docs = groups(snap)
    rows = docs.rows[group]
    best = docs.best_row(group, snap.vectors[rows] @ query)
    text, span = readable_passage(snap.texts, snap.spans, snap.docs, best)  # from a sentence or word start
    cosine = cosines(snap, query, _means(snap)[group : group + 1] if mean else rows).max()
    return Hit(docs.names[group], score, text, best, span, _title(snap, best), cosine=float(cosine))


def _pad(found: TopK, k: int) -> TopK:
    extra = k - found.scores.shape[1]
    if extra <= 0:
        return found
    n = len(found.scores)
    scores = np.hstack([found.scores, np.full((n, extra), -np.inf, np.float32)])
    return TopK(scores, np.hstack([found.indices, np.full((n, extra), -1, np.int64)]))


def _title(snap: Snapshot, row: int) -> str | None:
    """Row ``row``'s title, or None (an index without titles; a snapshot-like without the list)."""
    titles = getattr(snap, "titles", None)
    return titles[row] if titles else None
