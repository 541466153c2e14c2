"""A persistent vector index: embeddings, ids and texts on disk, searched exactly or approximately.

``VectorIndex`` is the public face of three parts: the segment store (``sbert.search.index.store``: the
folder's files and manifest, atomic writes, the writers' lock, garbage collection, damage checks), the
search structures (``sbert.search.index.structures``: exact, hnsw, int8, binary) and the best-first order
they share (``sbert.search.ranking``). See the store for the folder's layout and what makes writes
safe for readers and other writers.

An index may hold windows of long documents (``documents=``; its searches return documents with their
best passage) and a BM25 index of its texts (``bm25=True``) for hybrid search; how it answers those
queries is ``sbert.search.index.query``.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sbert.arrays import Array, as_float32
from sbert.errors import IndexFormatError, IndexMismatchError, SbertError
from sbert.search.base import Hit, Hybrid
from sbert.search.exact import TopK
from sbert.search.index import query as index_search
from sbert.search.index.base import (
    BaseIndex,
    HeldRows,
    RowFields,
    backend_after_add,
    backend_name,
    check_backend,
    check_documents_match,
    check_k,
    check_new_documents,
    check_rows,
    check_search,
    model_manifest,
    plan_extras,
    prepare,
    rows_to_delete,
)
from sbert.search.index.query import Documents
from sbert.search.index.store import (
    LEXICAL,
    LOCK_TIMEOUT,
    METRICS,
    IndexLockedError,
    SegmentStore,
    Snapshot,
    new_tag,
    now,
)
from sbert.search.index.structures import EXACT, STORED, SUFFIX, Structure

__all__ = ["Documents", "Hit", "Hybrid", "IndexLockedError", "VectorIndex", "backend_name"]

STRUCTURES = tuple(STORED)  # hnsw, int8, binary: the structures an index may keep beside its rows
COMPACT_AT = 0.25  # share of deleted rows that triggers a rewrite without them


def _store(path: str | Path) -> SegmentStore:
    return SegmentStore(path, {name: kind.settings for name, kind in STORED.items()}, SUFFIX)


class VectorIndex(HeldRows, BaseIndex):
    """Vectors with ids and texts in a folder. ``build`` makes one, ``open`` reads one, then
    ``add``/``delete``/``search``. Searching is exact unless an ``hnsw``, ``int8`` or ``binary``
    structure was built (``ann=True``, ``quantization=``) or asked for (``method=``).

    The object shows one version of the index (``ids``, ``manifest``, ``len`` ...); ``search`` and
    ``refresh`` move it to the newest one when another process has written to the folder, and its own
    writes move it to theirs. Safe to search from several threads.
    """

    def __init__(self, store: SegmentStore, snapshot: Snapshot, lock_timeout: float = LOCK_TIMEOUT) -> None:
        """The index in ``store`` at version ``snapshot``: use ``open`` or ``build``. A write waits up to
        ``lock_timeout`` seconds for another process's write to finish."""
        self._store, self._snap, self.lock_timeout = store, snapshot, lock_timeout
        self.path = store.path
        self._reload_lock = threading.Lock()
        self._skipped: tuple | None = None

    # -- reading ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, lock_timeout: float = LOCK_TIMEOUT) -> VectorIndex:
        """Open an index folder; IndexFormatError names what is missing or malformed. A write waits up to
        ``lock_timeout`` seconds for another process's write to finish."""
        path = Path(path)
        if not path.is_dir():
            raise IndexFormatError(f"{path}: no such index folder")
        store = _store(path)
        return cls(store, store.load(), lock_timeout)

    def held(self) -> Any:
        return self._snap

    @property
    def row_of(self) -> dict[str, int]:
        return self._snap.row_of

    @property
    def structures(self) -> list[str]:
        return list(self.manifest["structures"])

    @property
    def document_ids(self) -> list[str]:
        """The live documents of an index of documents, in the order of their first rows."""
        return index_search.groups(self._snap).names if self.documents else []

    def __len__(self) -> int:
        return len(self.ids) - len(self.deleted)

    def refresh(self) -> bool:
        """Move to the newest version on disk if another process wrote one; True if it did.

        A new version that cannot be used (damaged, or another model, width or metric) is skipped with
        a warning and the current one kept, so that a long-lived reader never fails because of a write.
        """
        snap = self._snap
        signature = self._store.signature()
        if signature is None or signature in (snap.signature, self._skipped):
            return False
        with self._reload_lock:
            if self._snap is not snap:
                return True  # another thread loaded it
            try:
                new = self._store.load()
                for key in ("model", "dim", "metric"):
                    if new.manifest[key] != snap.manifest[key]:
                        raise IndexMismatchError(
                            f"its {key} changed from {snap.manifest[key]!r} to {new.manifest[key]!r}"
                        )
                for name in snap.loaded():
                    if name in new.manifest["structures"]:
                        _structure(new, name)
            except SbertError as err:
                self._skipped = signature
                warnings.warn(f"{self.path}: keeping the version already loaded; the new one: {err}", stacklevel=2)
                return False
            self._snap = new
            return True

    def _current(self) -> Snapshot:
        self.refresh()
        return self._snap

    # -- searching -------------------------------------------------------------------------------------
    def default_method(self) -> str:
        """hnsw if built, else a quantised structure if built, else exact."""
        return _default_method(self.manifest)

    def search(
        self,
        queries: Array,
        k: int = 10,
        *,
        method: str | None = None,
        ef_search: int | None = None,
        rescore: int | None = None,
        backend: str | None = None,
        allow_mixed_backend: bool = False,
        mode: str | None = None,
        hybrid: Hybrid | None = None,
    ) -> list[list[Hit]]:
        """The best ``k`` live rows for each query embedding, best first (see ``search_rows``).

        In an index of documents, the best ``k`` documents instead, each with its best passage (``Hit.text``,
        ``Hit.span``): ``mode`` ``maxp`` (best window) or ``mean`` (mean window vector; always exact);
        default: the index's. ``hybrid``: fuse with BM25 results for the queries' texts (an index built
        with ``bm25=True``).
        """
        check_k(k)
        snap = self._current()
        check_search(self.path, snap.manifest, mode, hybrid)
        check_backend(self.path, snap.manifest, backend, allow_mixed_backend)
        q = prepare(queries, snap.manifest, self.path)

        def rows(n: int) -> TopK:
            return self._search(snap, q, n, method, ef_search, rescore, backend, allow_mixed_backend, prepared=True)

        bm25 = _lexical(snap) if hybrid is not None else None
        return index_search.search(snap, q, k, rows, mode, hybrid, bm25)

    def search_rows(
        self,
        queries: Array,
        k: int = 10,
        *,
        method: str | None = None,
        ef_search: int | None = None,
        rescore: int | None = None,
        backend: str | None = None,
        allow_mixed_backend: bool = False,
    ) -> TopK:
        """Row numbers and scores of the best ``k`` live rows per query; rows -1 pad when fewer exist.

        ``method``: exact (float32, brute force), hnsw (approximate, ``ef_search`` candidates), int8 or
        binary (quantised scan, then the best ``k x rescore`` re-scored with the float32 vectors;
        ``rescore=1`` keeps the quantised order and scores). ``backend``: how the queries were embedded
        (see ``check_backend``). Reads the newest version of the index first (see ``refresh``).
        """
        snap = self._current()
        return self._search(snap, queries, k, method, ef_search, rescore, backend, allow_mixed_backend)

    def _search(
        self, snap, queries, k, method, ef_search, rescore, backend, allow_mixed_backend, prepared=False
    ) -> TopK:
        check_k(k)
        check_backend(self.path, snap.manifest, backend, allow_mixed_backend)
        q = queries if prepared else prepare(queries, snap.manifest, self.path)
        structure = self._method(snap, method or _default_method(snap.manifest))
        k = min(k, max(1, len(snap.ids)))  # never wider than the index: padding is for deleted rows
        return structure.search(q, k, snap, ef_search=ef_search, rescore=rescore)

    def _method(self, snap: Snapshot, method: str) -> Structure:
        if method == "exact":
            return EXACT
        if method not in STORED:
            raise ValueError(f"unknown search method {method!r}; expected exact, {', '.join(STRUCTURES)}")
        if method not in snap.manifest["structures"]:
            have = ", ".join(snap.manifest["structures"]) or "none"
            raise ValueError(f"index {self.path} has no {method!r} structure; it has: {have}")
        return _structure(snap, method)

    # -- writing ---------------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        path: str | Path,
        embeddings: Array,
        *,
        model: str | Path,
        ids: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
        metric: str = "cosine",
        ann: bool = False,
        quantization: str | None = None,
        hnsw_m: int = 32,
        ef_construction: int = 128,
        ef_search: int = 64,
        overwrite: bool = False,
        show_progress: bool | None = None,
        backend: str | None = None,
        lock_timeout: float = LOCK_TIMEOUT,
        documents: Documents | None = None,
        bm25: bool = False,
        truncate_dim: int | None = None,
        titles: Sequence[str | None] | None = None,
        document_prompt: str | None = None,
        search: dict | None = None,
    ) -> VectorIndex:  # long: the signature and its documentation, one keyword per thing an index records
        """Write a new index at ``path`` from (n, dim) embeddings made by ``model`` (a name or folder).

        ``ids`` default to "0", "1", ...; ``texts`` are stored when given. ``ann`` adds an HNSW graph
        (FAISS; ``hnsw_m`` links per node, ``ef_construction``, ``ef_search``); ``quantization`` adds an
        ``int8`` or ``binary`` scan structure. ``backend`` records how the embeddings were made
        (``backend_name(encoder)``, e.g. ``torch/fp32``) so that vectors of another precision are refused
        later. ``path`` must be new, empty, or an index (replaced only with ``overwrite``): a folder of
        other files is refused. ``show_progress``: a bar while building structures (default: on a
        terminal, 100k rows or more).

        ``documents``: the rows are windows of documents (``Documents.of(encode_documents(...), ...)``;
        ``texts`` their passages); row ids are then ``<document id>#<window>`` and searches return
        documents. ``bm25``: also keep a BM25 index of ``texts`` for hybrid search. ``truncate_dim`` (the
        model's, ``fit_truncate_dim`` checks later models), ``document_prompt`` (the texts', "": none; later
        adds use it, ``retrieve.add_texts``): recorded. ``titles``: each row's title (a window's: its
        document's), kept beside its text and shown with its hits. ``search``: how ``sbert search`` searches
        this index unless told otherwise (``--auto``'s choice and evidence, ``sbert.search.auto``), recorded."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        if quantization not in (None, "int8", "binary"):
            raise ValueError(f"quantization must be 'int8' or 'binary', got {quantization!r}")
        store = _store(path)
        store.check_target(overwrite)
        x = as_float32(embeddings)
        if quantization == "binary" and x.shape[1] % 8:
            raise ValueError(f"binary quantisation needs a dimension divisible by 8, got {x.shape[1]}")
        manifest = model_manifest(model, backend, int(x.shape[1]), metric, truncate_dim)
        if ann:
            manifest["structures"]["hnsw"] = {"M": hnsw_m, "ef_construction": ef_construction, "ef_search": ef_search}
        if quantization:
            manifest["structures"][quantization] = {}
        plan_extras(manifest, documents, bm25, texts, document_prompt, search)
        store.path.mkdir(parents=True, exist_ok=True)
        index = cls(store, Snapshot.empty(store.path, manifest), lock_timeout)
        rows = RowFields.of(ids, texts, documents, len(x), titles)
        with index._writing(refresh=False):
            store.check_target(overwrite)  # again, under the lock: another process may have built one
            index._rebuild(manifest, prepare(x, manifest, store.path), rows, show_progress)
        return index

    @staticmethod
    def check_target(path: str | Path, overwrite: bool = False) -> None:
        """Raise unless ``build`` may write to ``path`` (call it before costly encoding): IndexExistsError
        for an index without ``overwrite``, FolderNotReplaceableError for a folder of other files."""
        _store(path).check_target(overwrite)

    # -- where it lives (homes.py) ---------------------------------------------------------------------
    @classmethod
    def open_at(cls, location: str | Path, *, table: str | None = None, **options: Any) -> VectorIndex:
        """The index folder ``location`` (``options``: ``open``'s); a ``table`` is refused."""
        _no_table(location, table)
        return cls.open(location, **options)

    @classmethod
    def check_location(
        cls, location: str | Path | None, *, table: str | None = None, overwrite: bool = False, **settings: Any
    ) -> str | Path:
        """``location``, once ``build`` may write there (``check_target``); a ``table`` is refused."""
        _no_table(location, table)
        cls.check_target(location, overwrite)
        return location

    @classmethod
    def build_at(cls, target: str | Path, embeddings: Array, *, encoder: Any = None, **options: Any) -> VectorIndex:
        """``build`` at ``target``; with the ``encoder`` that made ``embeddings``, the files of the torch-free
        query path of ``sbert search`` where it runs on ONNX (``sbert.backends.onnx_query``)."""
        from sbert.backends.onnx_query import record

        built = cls.build(target, embeddings, **options)
        if encoder is not None:
            record(built.path, encoder, built.manifest)
        return built

    def add(
        self,
        embeddings: Array,
        ids: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
        show_progress: bool | None = None,
        *,
        backend: str | None = None,
        allow_mixed_backend: bool = False,
        documents: Documents | None = None,
        titles: Sequence[str | None] | None = None,
    ) -> None:
        """Append rows (ids default to consecutive numbers after the largest numeric id).

        Waits for another process's write to finish, then adds to the newest version. ``backend``: how
        the embeddings were made (see ``check_backend``); another precision is refused unless
        ``allow_mixed_backend``, and the index then records ``mixed``. An index of documents takes
        windows of new documents (``documents``, split with the index's ``documents`` settings); its BM25
        index, if any, is rebuilt over every row.
        """
        with self._writing():
            snap = self._snap
            recorded = backend_after_add(self.path, snap.manifest, backend, allow_mixed_backend)
            x = prepare(embeddings, snap.manifest, self.path)
            check_documents_match(self.path, snap, documents)
            rows = RowFields.of(ids, texts, documents, len(x), titles)
            if rows.docs is not None:
                check_new_documents(self.path, snap, rows.docs)
            self._append(snap, x, rows, recorded, show_progress)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete rows by id (in an index of documents: documents, with all their windows); returns how
        many rows. Unknown ids raise KeyError naming them. Rewrites the index without deleted rows once
        they pass a quarter of it."""
        ids = [str(i) for i in ids]
        with self._writing():
            snap = self._snap
            what, missing, rows = rows_to_delete(snap, ids)
            if missing:
                more = " ..." if len(missing) > 5 else ""
                raise KeyError(f"index {self.path} has no live {what} with ids {missing[:5]}{more}")
            rows = np.unique(rows).astype(np.int64)
            deleted = np.union1d(snap.deleted, rows).astype(np.int64)
            if len(deleted) > COMPACT_AT * len(snap.ids):
                self._compact(snap, deleted)
            else:
                name = self._store.write_deleted(deleted)
                self._commit({**snap.manifest, "deleted": name, "updated": now()})
        return len(rows)

    def compact(self) -> None:
        """Rewrite the index as one segment without deleted rows, rebuilding its structures."""
        with self._writing():
            self._compact(self._snap, self._snap.deleted)

    def _compact(self, snap: Snapshot, deleted: np.ndarray) -> None:
        keep = np.setdiff1d(np.arange(len(snap.ids)), deleted)
        vectors = np.ascontiguousarray(snap.vectors[keep])
        self._rebuild(snap.manifest, vectors, RowFields.of_snapshot(snap).take(keep), None)

    def _rebuild(self, manifest: dict, x: np.ndarray, rows: RowFields, show_progress: bool | None) -> None:
        """Write ``x`` as the index's only segment, with its structures made anew."""
        rows = rows.named(len(x), [])
        check_rows(x, rows.ids, rows.texts, {})
        tag = new_tag()
        seg = self._store.write_segment(tag, x, rows.ids, rows.texts, rows.docs, rows.spans, rows.titles)
        structures = {}
        for name, entry in manifest["structures"].items():
            config = {key: value for key, value in entry.items() if key != "file"}
            built = STORED[name].build(x, config, show_progress)
            structures[name] = {**config, "file": self._store.write_structure(name, tag, built.to_bytes())}
        lexical = self._write_lexical(manifest, tag, rows)
        self._commit(
            {
                **manifest,
                "segments": [seg],
                "deleted": None,
                "structures": structures,
                "lexical": lexical,
                "updated": now(),
            }
        )

    def _append(self, snap: Snapshot, x: np.ndarray, rows: RowFields, backend: str | None, show_progress) -> None:
        rows = rows.named(len(x), snap.ids)
        check_rows(x, rows.ids, rows.texts, snap.row_of)
        tag = new_tag()
        seg = self._store.write_segment(tag, x, rows.ids, rows.texts, rows.docs, rows.spans, rows.titles)
        structures = {}
        for name, entry in snap.manifest["structures"].items():
            # A private copy read from disk (we hold the lock, so the file is there): the snapshot's own
            # copy may be serving searches, and must stay as it was if this write fails.
            structure = _read(snap, name, self._store.open(entry["file"]), self.path / entry["file"])
            structure.add(x, show_progress)
            structures[name] = {**entry, "file": self._store.write_structure(name, tag, structure.to_bytes())}
        segments = [*snap.manifest["segments"], seg]
        texts = None if rows.texts is None else [*snap.texts, *rows.texts]
        every = RowFields(None, texts)
        if rows.docs is not None and rows.spans is not None:
            every = RowFields(None, texts, [*snap.docs, *rows.docs], [*snap.spans, *rows.spans])
        lexical = self._write_lexical(snap.manifest, tag, every, snap.deleted)
        manifest = {**snap.manifest, "segments": segments, "structures": structures, "updated": now()}
        if lexical is not None:
            manifest["lexical"] = lexical
        if backend is not None or "backend" in manifest:
            manifest["backend"] = backend
        self._commit(manifest)

    def _write_lexical(
        self, manifest: dict, tag: str, rows: RowFields, deleted: np.ndarray | None = None
    ) -> dict | None:
        """The BM25 index (``index_search.lexical_index``: of every row's text, or of whole documents),
        written as a new file, if the index keeps one."""
        if manifest.get("lexical") is None:
            return None
        bm25 = index_search.lexical_index(manifest, rows.texts, rows.docs, rows.spans, deleted)
        over = {key: value for key, value in manifest["lexical"].items() if key != "file"}
        return {**over, "file": self._store.write_structure(LEXICAL, tag, bm25.to_bytes())}

    def _commit(self, manifest: dict) -> None:
        self._snap = self._store.commit(manifest)

    @contextlib.contextmanager
    def _writing(self, refresh: bool = True) -> Iterator[None]:
        """Hold the folder's write lock (waiting up to ``lock_timeout`` s), with the newest version loaded
        (``refresh``); on failure, reload what is on disk (the last committed version)."""
        with self._store.locked(self.lock_timeout):
            try:
                if refresh:
                    self._snap = self._store.newest(self._snap)
                yield
            except BaseException:
                self._snap = self._store.recover(self._snap)
                raise


def _structure(snap: Snapshot, name: str) -> Structure:
    """The snapshot's structure ``name``, read from its file on first use."""
    return snap.structure(name, lambda handle, file: _read(snap, name, handle, file))


def _read(snap: Snapshot, name: str, handle, file: Path) -> Structure:
    """Structure ``name`` of ``snap`` from the open ``file`` (closed after)."""
    with handle:
        return STORED[name].load(handle, file, snap.manifest["structures"][name], snap.manifest["dim"], len(snap.ids))


def _default_method(manifest: dict) -> str:
    for name in STORED:
        if name in manifest["structures"]:
            return name
    return "exact"


def _lexical(snap: Snapshot):
    """The snapshot's BM25 index, read from its file on first use."""
    from sbert.search.lexical import BM25

    def read(handle, file: Path) -> BM25:
        over_documents = snap.manifest["lexical"].get("over") == "documents"
        with handle:
            return BM25.from_bytes(handle.read(), file, rows=None if over_documents else len(snap.ids))

    return snap.structure(LEXICAL, read)


def _no_table(location: str | Path, table: str | None) -> None:
    if table is not None:
        raise ValueError(f"--table applies to a postgresql:// URL, not to the folder {location}")
