"""An index in memory: the folder index's rows and search, without the folder.

``MemoryIndex`` keeps what a ``VectorIndex`` keeps (vectors, ids, texts, for an index of documents each
row's document and span, a BM25 index for hybrid search) in memory, and answers through the very code the
folder index answers through (``sbert.search.index.query`` over the exact structure), so that a ranking
measured on it (``sbert eval``) is the ranking ``sbert search`` gives for the same rows. Nothing is
written; it lives as long as the object. Searching is exact (no HNSW or quantised structures).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sbert.arrays import Array, as_float32
from sbert.search.base import Hit, Hybrid
from sbert.search.exact import TopK
from sbert.search.index import query as index_search
from sbert.search.index.base import (
    BaseIndex,
    HeldRows,
    RowFields,
    backend_after_add,
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
from sbert.search.index.store import METRICS
from sbert.search.index.structures import EXACT

if TYPE_CHECKING:
    from sbert.search.index.folder import VectorIndex

__all__ = ["MemoryIndex"]


class _Version:
    """The rows as ``index_search`` and the exact structure read them (a store ``Snapshot``'s shape)."""

    def __init__(self, manifest: dict, vectors: np.ndarray, rows: RowFields, deleted: np.ndarray) -> None:
        self.manifest, self.vectors, self.deleted = manifest, vectors, deleted
        self.ids = list(rows.ids or [])
        self.texts = list(rows.texts) if rows.texts is not None else [None] * len(self.ids)
        self.docs = list(rows.docs) if rows.docs is not None else [None] * len(self.ids)
        self.spans = list(rows.spans) if rows.spans is not None else [None] * len(self.ids)
        self.titles = list(rows.titles) if rows.titles is not None else [None] * len(self.ids)
        dead = set(deleted.tolist())
        self.row_of = {i: r for r, i in enumerate(self.ids) if r not in dead}
        self._derived: dict[str, Any] = {}

    def derived(self, name: str, make):
        if name not in self._derived:
            self._derived[name] = make()
        return self._derived[name]

    def rows(self) -> RowFields:
        docs = self.docs if self.manifest.get("documents") else None
        return RowFields(self.ids, self.texts, docs, self.spans if docs is not None else None, self.titles)


class MemoryIndex(HeldRows, BaseIndex):
    """Vectors with ids and texts in memory, searched exactly as a ``VectorIndex`` searches them:
    ``build``, then ``add``/``delete``/``search`` (the same arguments and ``Hit``s)."""

    def __init__(self, manifest: dict, vectors: np.ndarray, rows: RowFields, deleted: np.ndarray | None = None) -> None:
        """Use ``build``."""
        self.path = "(memory)"
        self._version = _Version(manifest, vectors, rows, np.zeros(0, np.int64) if deleted is None else deleted)
        self._bm25: Any = None

    @classmethod
    def build(
        cls,
        embeddings: Array,
        *,
        model: str | Path,
        ids: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
        metric: str = "cosine",
        backend: str | None = None,
        documents: Documents | None = None,
        bm25: bool = False,
        titles: Sequence[str | None] | None = None,
        document_prompt: str | None = None,
        search: dict | None = None,
        truncate_dim: int | None = None,
        **ignored: Any,
    ) -> MemoryIndex:
        """An index of (n, dim) ``embeddings`` made by ``model``; arguments as ``VectorIndex.build`` (those
        about files, locks and structures are ignored)."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        x = as_float32(embeddings)
        manifest = model_manifest(model, backend, int(x.shape[1]), metric, truncate_dim)
        plan_extras(manifest, documents, bm25, texts, document_prompt, search)
        if bm25:
            # kept in memory, built at the first hybrid search
            manifest["lexical"] = {**manifest["lexical"], "file": None}
        rows = RowFields.of(ids, texts, documents, len(x), titles).named(len(x), [])
        check_rows(x, rows.ids, rows.texts, {})
        return cls(manifest, prepare(x, manifest, "(memory)"), rows)

    # -- where it lives (homes.py: location None) -------------------------------------------------------
    @classmethod
    def open_at(cls, location: str | Path, *, table: str | None = None, **options: Any) -> MemoryIndex:
        raise ValueError("an index in memory is not opened but built (location None): it lives as long as its object")

    @classmethod
    def check_location(
        cls, location: str | Path | None, *, table: str | None = None, overwrite: bool = False, **settings: Any
    ) -> None:
        """Nothing to check: nothing is written."""
        return None

    @classmethod
    def build_at(cls, target: None, embeddings: Array, *, encoder: Any = None, **options: Any) -> MemoryIndex:
        """``build`` (``options`` about files, locks and structures are ignored)."""
        return cls.build(embeddings, **options)

    # -- what it holds ---------------------------------------------------------------------------------
    def held(self) -> Any:
        return self._version

    @property
    def document_ids(self) -> list[str]:
        return index_search.groups(self._version).names if self.documents else []

    @property
    def structures(self) -> list[str]:
        return []

    def default_method(self) -> str:
        return "exact"

    def __len__(self) -> int:
        return len(self.ids) - len(self.deleted)

    # -- searching -------------------------------------------------------------------------------------
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
        """As ``VectorIndex.search``; ``method`` may only be exact."""
        check_k(k)
        if method not in (None, "exact"):
            raise ValueError(f"index {self.path} searches exactly; it has no {method!r} structure")
        version = self._version
        check_search(self.path, version.manifest, mode, hybrid)
        self.check_backend(backend, allow_mixed_backend)
        q = prepare(queries, version.manifest, self.path)

        def rows(n: int) -> TopK:
            return EXACT.search(q, n, version)

        return index_search.search(version, q, k, rows, mode, hybrid, self._lexical() if hybrid else None)

    def _lexical(self):
        if self._bm25 is None:
            version, rows = self._version, self._version.rows()
            self._bm25 = index_search.lexical_index(
                version.manifest, rows.texts, rows.docs, rows.spans, version.deleted
            )
        return self._bm25

    # -- writing ---------------------------------------------------------------------------------------
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
        """Append rows, as ``VectorIndex.add`` does."""
        old = self._version
        recorded = backend_after_add(self.path, old.manifest, backend, allow_mixed_backend)
        x = prepare(embeddings, old.manifest, self.path)
        check_documents_match(self.path, old, documents)
        new = RowFields.of(ids, texts, documents, len(x), titles).named(len(x), old.ids)
        check_rows(x, new.ids, new.texts, old.row_of)
        if new.docs is not None:
            check_new_documents(self.path, old, new.docs)
        if self.lexical and (new.texts is None or any(t is None for t in new.texts)):
            raise ValueError("a BM25 index needs the rows' texts; give texts")
        manifest = dict(old.manifest)
        if recorded != manifest.get("backend"):
            manifest["backend"] = recorded
        before = old.rows()
        rows = RowFields(
            [*before.ids, *new.ids],
            [*old.texts, *(new.texts if new.texts is not None else [None] * len(x))],
            None if new.docs is None else [*before.docs, *new.docs],
            None if new.spans is None else [*before.spans, *new.spans],
            [*old.titles, *(new.titles if new.titles is not None else [None] * len(x))],
        )
        self._version = _Version(manifest, np.concatenate([old.vectors, x]), rows, old.deleted)
        self._bm25 = None

    def save(self, path: str | Path, *, overwrite: bool = False) -> VectorIndex:
        """Write the live rows, with all this index records (model, documents, BM25, titles, prompt, search
        settings), as a folder index at ``path`` (``VectorIndex.build``: ``overwrite`` replaces an index
        there); the folder index, which searches them as this one does."""
        from sbert.search.index.folder import VectorIndex

        version, manifest = self._version, self._version.manifest
        keep = np.setdiff1d(np.arange(len(version.ids)), version.deleted)
        rows = version.rows().take(keep)
        documents = None
        if manifest.get("documents"):
            kept = manifest["documents"]
            spans = np.asarray(rows.spans, dtype=np.int64).reshape(-1, 2)
            documents = Documents(rows.docs, spans, kept["window"], kept["overlap"], kept["mode"],
                                  kept.get("prompt"), kept.get("max_windows"))  # fmt: skip
        return VectorIndex.build(
            path, version.vectors[keep], model=manifest["model"], ids=None if documents else rows.ids,
            texts=rows.texts, metric=manifest["metric"], backend=manifest.get("backend"), documents=documents,
            bm25=self.lexical, truncate_dim=manifest.get("truncate_dim"), titles=rows.titles,
            document_prompt=manifest.get("document_prompt"), search=manifest.get("search"), overwrite=overwrite,
        )  # fmt: skip

    def delete(self, ids: Iterable[str]) -> int:
        """Delete rows by id (in an index of documents: documents, with all their windows); returns how
        many rows. Unknown ids raise KeyError naming them."""
        ids = [str(i) for i in ids]
        old = self._version
        _, missing, rows = rows_to_delete(old, ids)
        if missing:
            raise KeyError(f"index {self.path} has no live ids {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        deleted = np.union1d(old.deleted, np.unique(rows)).astype(np.int64)
        self._version = _Version(old.manifest, old.vectors, old.rows(), deleted)
        return len(set(rows))
