"""What every index is, and the checks its homes share.

``BaseIndex`` is the base of the three homes of an index: ``VectorIndex`` (a folder, ``folder.py``),
``MemoryIndex`` (in memory, ``memory.py``: what ``sbert eval`` builds) and ``PgVectorIndex`` (a PostgreSQL
table, ``postgres.py``). Each gives its ``manifest`` (what it records of its model: model, model_path,
backend, dim, metric, truncate_dim) and ``path`` (how messages name it), ``add``/``delete`` rows and
``search`` by query vectors (with the query texts for hybrid search) returning ``Hit``s best first; the model
and precision checks, the rows' checks and the mixed-backend rule live here, once. How texts become rows and
queries become hits, the same for every home, is ``sbert.search.retrieve``; which class lives at a location
(a folder, a ``postgresql://`` URL, None: memory) is ``homes.py``.

The folder and the memory index keep their rows themselves: ``RowFields`` (ids, texts, titles, windows of
documents) and the checks on them are shared by both.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from sbert.arrays import Array, as_float32
from sbert.errors import IndexMismatchError
from sbert.search.index import query as index_search
from sbert.search.index.store import new_manifest

if TYPE_CHECKING:
    from sbert.search.base import Hit, Hybrid
    from sbert.search.index.query import Documents

__all__ = [
    "MIXED",
    "BaseIndex",
    "RowFields",
    "backend_after_add",
    "backend_name",
    "check_backend",
    "check_documents_match",
    "check_k",
    "check_new_documents",
    "check_rows",
    "check_search",
    "model_manifest",
    "next_ids",
    "plan_extras",
    "precision",
    "prepare",
    "rows_to_delete",
    "window_ids",
]

MIXED = "mixed"  # the backend of an index whose rows were made by different backends or precisions


class _Runs(Protocol):
    @property
    def runtime(self) -> str: ...


def backend_name(encoder: _Runs) -> str:
    """How an ``Encoder`` makes its vectors, as recorded in an index: ``torch/fp32``, ``onnx/int8``, ..."""
    return encoder.runtime


def precision(backend: str) -> str:
    """``fp32`` of ``torch/fp32``: the part of a backend name that decides whether vectors are comparable."""
    return backend.rpartition("/")[2]


def check_backend(path: str | Path, manifest: dict, backend: str | None, allow_mixed: bool) -> None:
    """Raise IndexMismatchError if vectors made by ``backend`` are of another precision than the index's."""
    recorded = manifest.get("backend")
    if not recorded or not backend or recorded == MIXED or allow_mixed:
        return
    if precision(recorded) != precision(backend):
        raise IndexMismatchError(
            f"index {path} holds vectors made with {recorded}; these are made with {backend}: vectors of another "
            f"precision are not comparable enough to mix. Embed with the index's backend and precision "
            f"(--backend/--precision), or pass allow_mixed_backend=True to use them anyway"
        )


def backend_after_add(path: str | Path, manifest: dict, backend: str | None, allow_mixed: bool) -> str | None:
    """The backend an index records once rows made by ``backend`` join its own (``check_backend`` first): its
    recorded one, or ``MIXED`` where both are known and their precisions differ."""
    check_backend(path, manifest, backend, allow_mixed)
    recorded = manifest.get("backend")
    if recorded and backend and recorded != MIXED and precision(recorded) != precision(backend):
        return MIXED
    return recorded


class BaseIndex(ABC):
    """An index of rows (texts, or windows of documents) with the model that embedded them.

    ``manifest`` records the model, ``dim``, ``metric``, ``backend``, and for an index of documents its
    ``documents`` settings (``window``, ``overlap``, ``mode``, ``prompt``); ``lexical``: whether it keeps
    BM25 for hybrid search. ``search`` returns, per query, at most ``k`` ``Hit``s best first (score
    descending, then row); in an index of documents, documents with their best passage.

    Where it lives (``homes.py`` finds the class): ``check_location`` checks that a new index may be written
    at a location and returns what ``build_at`` writes to; ``open_at`` opens the index at a location.
    """

    path: str | Path

    # -- where it lives --------------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def open_at(cls, location: str | Path, *, table: str | None = None, **options: Any) -> BaseIndex:
        """The index at ``location`` (``table``: a database's; ``options``: the home's own)."""

    @classmethod
    @abstractmethod
    def check_location(
        cls, location: str | Path | None, *, table: str | None = None, overwrite: bool = False, **settings: Any
    ) -> Any:
        """Raise unless a new index with ``settings`` may be written at ``location``; what ``build_at`` takes."""

    @classmethod
    @abstractmethod
    def build_at(cls, target: Any, embeddings: Array, *, encoder: Any = None, **options: Any) -> BaseIndex:
        """A new index at ``target`` (``check_location``'s) of ``embeddings`` made by ``encoder``."""

    # -- what it holds ---------------------------------------------------------------------------------
    @property
    @abstractmethod
    def manifest(self) -> dict: ...

    @abstractmethod
    def __len__(self) -> int: ...

    @property
    @abstractmethod
    def deleted(self) -> np.ndarray:
        """Rows deleted but still stored (int64 row numbers)."""

    @property
    @abstractmethod
    def structures(self) -> list[str]:
        """The search structures the index keeps beside its rows (``hnsw``, ``int8``, ``binary``)."""

    @abstractmethod
    def default_method(self) -> str:
        """How ``search`` searches unless told: ``exact`` or a structure's name."""

    @property
    def documents(self) -> dict | None:
        """How the documents of an index of documents were split and are scored (``window``, ``overlap``,
        ``mode``); None for an index of texts."""
        return self.manifest.get("documents")

    @property
    def document_ids(self) -> list[str]:
        """The live documents of an index of documents, in the order of their first rows ([]: of texts)."""
        return []

    @property
    def lexical(self) -> bool:
        """Whether the index keeps a BM25 index of its texts (for hybrid search)."""
        return bool(self.manifest.get("lexical"))

    @property
    def model(self) -> str:
        return self.manifest["model"]

    @property
    def backend(self) -> str | None:
        """How the vectors were made (``torch/fp32``, ``onnx/int8``, ``mixed``), or None where not recorded."""
        return self.manifest.get("backend")

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    @property
    def metric(self) -> str:
        return self.manifest["metric"]

    @property
    def truncate_dim(self) -> int | None:
        """The ``truncate_dim`` the vectors were cut to (None: not cut, or an index of an older sbert)."""
        return self.manifest.get("truncate_dim")

    # -- searching and writing -------------------------------------------------------------------------
    @abstractmethod
    def search(self, queries: Array, k: int = 10, **options: Any) -> list[list[Hit]]: ...

    @abstractmethod
    def add(self, embeddings: Array, ids: Sequence[str] | None = None, texts: Any = None, **options: Any) -> None: ...

    @abstractmethod
    def delete(self, ids: Iterable[str]) -> int: ...

    # -- checks ----------------------------------------------------------------------------------------
    def check_model(self, name_or_path: str | Path, dim: int | None = None) -> None:
        """Raise IndexMismatchError unless ``name_or_path`` (and ``dim``) is the model the index was built with."""
        from sbert.adapter_folder import check_adapter
        from sbert.model_names import canonical_name, resolve

        same = canonical_name(name_or_path) == self.model
        if not same and self.manifest.get("model_path"):
            with contextlib.suppress(Exception):
                same = str(resolve(name_or_path).resolve()) == self.manifest["model_path"]
        check_adapter(self.path, self.manifest.get("adapter"), name_or_path)  # a LoRA adapter's: by its weights
        if not same and not self.manifest.get("adapter"):
            raise IndexMismatchError(
                f"index {self.path} was built with model {self.model!r} (dim {self.dim}); "
                f"refusing to use it with {str(name_or_path)!r}: embeddings of different models are not comparable"
            )
        if dim is not None and dim != self.dim:
            raise IndexMismatchError(f"index {self.path} holds {self.dim}-dim vectors; the model gives {dim}")

    def check_encoder(self, name_or_path: str | Path, encoder: Any, allow_mixed_backend: bool = False) -> None:
        """Check ``encoder`` (loaded from ``name_or_path``) before it embeds this index's queries or new texts:
        the index's own model (and adapter), its ``truncate_dim`` (given where the encoder has none), the width
        of its vectors and their precision (another only with ``allow_mixed_backend``); IndexMismatchError
        otherwise."""
        self.check_model(name_or_path)
        self.fit_truncate_dim(encoder)
        self.check_model(name_or_path, encoder.dim)
        self.check_backend(getattr(encoder, "runtime", None), allow_mixed_backend)

    def fit_truncate_dim(self, encoder: Any) -> None:
        """Give ``encoder`` the index's ``truncate_dim`` where it has none; raise IndexMismatchError where it has
        another. Indexes of older sbert versions record none: nothing is checked (their ``dim`` still is)."""
        if "truncate_dim" not in self.manifest:
            return
        recorded = self.manifest["truncate_dim"]
        if encoder.truncate_dim is None and recorded is not None:
            encoder.truncate_dim = recorded
        elif encoder.truncate_dim != recorded:
            raise IndexMismatchError(
                f"index {self.path} holds vectors cut to truncate_dim {recorded}; the model cuts them to "
                f"{encoder.truncate_dim}: vectors cut to another width are not comparable"
            )

    def check_backend(self, backend: str | None, allow_mixed: bool = False) -> None:
        """Raise IndexMismatchError if vectors made by ``backend`` (``torch/fp32``, ``onnx/int8``, ...; see
        ``backend_name``) are not comparable with the index's own. Only the precision counts (fp32 vectors
        agree across backends to ~1e-6; bf16 and int8 ones do not). Nothing is checked where either side
        is unknown (None; indexes of older sbert versions) or the index is already mixed."""
        check_backend(self.path, self.manifest, backend, allow_mixed)


# -- the checks every home makes ----------------------------------------------------------------------------
def check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def model_manifest(
    model: str | Path, backend: str | None, dim: int, metric: str, truncate_dim: int | None = None
) -> dict:
    """A new index's manifest for vectors of width ``dim`` made by ``model`` (a name or folder), cut to
    ``truncate_dim`` (None: not cut)."""
    from sbert.adapter_folder import adapter_record
    from sbert.model_names import canonical_name, resolve

    if truncate_dim is not None and truncate_dim != dim:
        raise ValueError(f"truncate_dim {truncate_dim} does not match the embeddings' {dim} dimensions")

    model_path = None
    with contextlib.suppress(Exception):
        model_path = str(resolve(model).resolve())
    manifest = new_manifest(model=canonical_name(model), model_path=model_path, backend=backend, dim=dim, metric=metric)
    adapter = adapter_record(model_path) if model_path else None  # a LoRA adapter's name, base and weights' hash
    return {**manifest, "truncate_dim": truncate_dim, **({"adapter": adapter} if adapter else {})}


def prepare(embeddings: Array, manifest: dict, path: str | Path) -> np.ndarray:
    """Embeddings as the index keeps and searches them: float32, C order, unit length for cosine."""
    x = as_float32(embeddings)
    if x.shape[1] != manifest["dim"]:
        raise IndexMismatchError(
            f"index {path} holds {manifest['dim']}-dim vectors (model {manifest['model']!r}); got {x.shape[1]}-dim"
        )
    if not np.isfinite(x).all():
        raise ValueError("embeddings contain NaN or infinite values")
    if manifest["metric"] != "cosine":
        return np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms == 0, 1, norms), dtype=np.float32)


def next_ids(ids: Sequence[str], n: int) -> list[str]:
    """``n`` new ids: consecutive numbers after the largest numeric id."""
    numeric = [int(i) for i in ids if i.isdigit()]
    start = max(numeric) + 1 if numeric else 0
    return [str(start + i) for i in range(n)]


def check_rows(
    x: np.ndarray, ids: list[str], texts: Sequence[str | None] | None, row_of: dict[str, int] | None = None
) -> None:
    """Refuse rows whose ids and texts do not match the ``x`` vectors one for one, texts that are not strings,
    and ids repeated among themselves or already in the index (``row_of``)."""
    n = len(x)
    if len(ids) != n or (texts is not None and len(texts) != n):
        raise ValueError(f"{n} embeddings but {len(ids)} ids and {len(texts) if texts is not None else 0} texts")
    if texts is not None and not all(isinstance(t, str | None) for t in texts):
        raise ValueError("texts must be strings (or None)")
    clash = [i for i in dict.fromkeys(ids) if i in (row_of or {})]
    if clash or len(set(ids)) != n:
        dupes = clash or [i for i, count in Counter(ids).items() if count > 1]
        raise ValueError(f"ids must be unique in the index; repeated: {dupes[:5]}{' ...' if len(dupes) > 5 else ''}")


def check_search(path: str | Path, manifest: dict, mode: str | None, hybrid: Hybrid | None) -> None:
    """Refuse search options the index cannot honour: hybrid without BM25, a mode in an index of texts."""
    if hybrid is not None and not manifest.get("lexical"):
        raise ValueError(f"index {path} has no BM25 index for hybrid search; build it with bm25=True (--bm25)")
    if mode is not None and not manifest.get("documents"):
        raise ValueError(f"index {path} holds texts, not windows of documents: 'mode' does not apply")


# -- rows an index keeps itself (the folder and the memory index) -------------------------------------------
class HeldRows:
    """The fields of an index that holds its rows as one snapshot (the folder and the memory index):
    ``held()`` returns it (anything with ``manifest``, ``ids``, ``texts``, ``vectors`` and ``deleted``)."""

    def held(self) -> Any:
        raise NotImplementedError

    @property
    def manifest(self) -> dict:
        return self.held().manifest

    @property
    def ids(self) -> list[str]:
        return self.held().ids

    @property
    def texts(self) -> list[str | None]:
        return self.held().texts

    @property
    def vectors(self) -> np.ndarray:
        return self.held().vectors

    @property
    def deleted(self) -> np.ndarray:
        return self.held().deleted


@dataclass(frozen=True)
class RowFields:
    """What one write stores beside the vectors: row ids (None: numbered), texts, and for windows of
    documents each row's document id and character span."""

    ids: list[str] | None
    texts: Sequence[str | None] | None
    docs: list[str] | None = None
    spans: list[tuple[int, int]] | None = None
    titles: Sequence[str | None] | None = None  # each row's title (a window's: its document's), or None

    @classmethod
    def of(cls, ids: Sequence[str] | None, texts, documents: Documents | None, n: int, titles=None) -> RowFields:
        ids = None if ids is None else [str(i) for i in ids]
        if titles is not None and len(titles) != n:
            raise ValueError(f"{n} embeddings but {len(titles)} titles")
        titles = None if titles is None or all(t is None for t in titles) else list(titles)
        if documents is None:
            return cls(ids, texts, titles=titles)
        if ids is not None:
            raise ValueError("an index of documents names its rows itself: give document ids in documents, not ids")
        if len(documents.ids) != n or len(documents.spans) != n:
            raise ValueError(f"{n} embeddings but {len(documents.ids)} document ids and {len(documents.spans)} spans")
        docs = [str(d) for d in documents.ids]
        spans = [(int(a), int(b)) for a, b in np.asarray(documents.spans).reshape(-1, 2).tolist()]
        return cls(window_ids(docs), texts, docs, spans, titles)

    @classmethod
    def of_snapshot(cls, snap: Any) -> RowFields:
        titles = getattr(snap, "titles", None)
        titles = None if titles is None or all(t is None for t in titles) else titles
        if not snap.manifest.get("documents"):
            return cls(snap.ids, snap.texts, titles=titles)
        return cls(snap.ids, snap.texts, snap.docs, snap.spans, titles)

    def take(self, keep: np.ndarray) -> RowFields:
        def pick(values):
            return None if values is None else [values[r] for r in keep.tolist()]

        return RowFields(pick(self.ids), pick(self.texts), pick(self.docs), pick(self.spans), pick(self.titles))

    def named(self, n: int, existing: list[str]) -> RowFields:
        """These rows with ids: consecutive numbers after ``existing``'s largest numeric id where none were given."""
        if self.ids is not None:
            return self
        return RowFields(next_ids(existing, n), self.texts, self.docs, self.spans, self.titles)


def window_ids(docs: list[str]) -> list[str]:
    """Row ids of windows: ``<document id>#<number of the window in its document>``."""
    seen: Counter[str] = Counter()
    out = []
    for doc in docs:
        out.append(f"{doc}#{seen[doc]}")
        seen[doc] += 1
    return out


def plan_extras(
    manifest: dict, documents: Documents | None, bm25: bool, texts, document_prompt: str | None = None, search=None
) -> None:
    """Record in a new index's manifest that it holds documents and/or keeps a BM25 index, the document
    prompt its texts were embedded with (windows of documents: in ``documents``) and how to search it."""
    if search:
        manifest["search"] = dict(search)
    if documents is not None:
        manifest["documents"] = documents.settings()
    elif document_prompt is not None:
        manifest["document_prompt"] = document_prompt
    if bm25:
        if texts is None:
            raise ValueError("a BM25 index needs the rows' texts; give texts")
        manifest["lexical"] = index_search.plan_lexical(documents is not None)  # its file is written with the rows


def check_documents_match(path: str | Path, version: Any, documents: Documents | None) -> None:
    """Refuse windows of documents for an index of texts, and texts for an index of documents."""
    if bool(version.manifest.get("documents")) != (documents is not None):
        what = "windows of documents (documents=...)" if documents is None else "texts, not windows of documents"
        raise ValueError(f"index {path} holds {'documents' if documents is None else 'texts'}: add {what}")


def check_new_documents(path: str | Path, version: Any, docs: list[str]) -> None:
    """Refuse documents the index holds already."""
    live = set(index_search.groups(version).names)
    clash = [d for d in dict.fromkeys(docs) if d in live]
    if clash:
        raise ValueError(f"index {path} already holds documents {clash[:5]}; delete them first to replace them")


def rows_to_delete(version: Any, ids: list[str]) -> tuple[str, list[str], list[int]]:
    """What deleting ``ids`` deletes in ``version`` (a store ``Snapshot``'s shape): ("documents" or "rows",
    the ids it does not hold live, the rows: in an index of documents every window of each document)."""
    if version.manifest.get("documents"):
        found = index_search.groups(version)
        number = {name: g for g, name in enumerate(found.names)}
        missing = [i for i in ids if i not in number]
        return "documents", missing, [r for i in ids if i in number for r in found.rows[number[i]].tolist()]
    missing = [i for i in ids if i not in version.row_of]
    return "rows", missing, [version.row_of[i] for i in ids if i in version.row_of]
