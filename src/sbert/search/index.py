"""A persistent vector index: embeddings, ids and texts on disk, searched exactly or approximately.

An index folder holds::

    manifest.json            model, backend, dimension, metric, and the files below that make up the index
    seg-<tag>.npy            float32 vectors (unit length for cosine), one file per build or add
    seg-<tag>.jsonl          one {"id": ..., "text": ...} line per row of the matching .npy
    deleted-<tag>.npy        deleted row numbers (int64), when any
    <structure>-<tag>.faiss  search structures: hnsw (approximate), int8, binary (quantised)
    .lock                    the writers' lock (holds the process id of the last writer)

Files are never changed once written. A write takes the lock (waiting for another writer, up to
``lock_timeout`` seconds), re-reads the manifest, makes new files, atomically replaces manifest.json,
then removes the files the manifest no longer names; a crash at any point leaves the previous manifest
and every file it names intact, so the index stays readable.

Readers open every file a manifest names when they load it (vectors memory-mapped, structure files
held open), so a later write that removes those files cannot break them: on POSIX systems an open or
mapped file outlives its name. A reader that finds a named file gone re-reads the manifest, which a
writer replaced first. ``search`` notices a new manifest (one ``stat``) and loads it, so a long-lived
index (``sbert serve --index``) answers from the newest version without a restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import threading
import time
import uuid
import warnings
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np

from sbert.atomic import FolderNotReplaceableError, atomic_file
from sbert.errors import IndexExistsError, IndexFormatError, IndexMismatchError, SbertError
from sbert.search.exact import TopK, as_tensor, semantic_search
from sbert.similarity import Array

FORMAT = "sbert-vector-index"
VERSION = 1
MANIFEST = "manifest.json"
LOCK = ".lock"
LOCK_TIMEOUT = 600.0  # seconds a writer waits for another one to finish
STRUCTURES = ("hnsw", "int8", "binary")
METRICS = ("cosine", "dot")
DEFAULT_RESCORE = {"int8": 4, "binary": 10}
COMPACT_AT = 0.25  # share of deleted rows that triggers a rewrite without them
MIXED = "mixed"  # the backend of an index whose rows were made by different backends or precisions
_TAG = r"\d{14}-[0-9a-f]{8}"
_OWN_FILE = re.compile(
    rf"^\.?(?:seg-{_TAG}\.(?:npy|jsonl)|deleted-{_TAG}\.npy|(?:{'|'.join(STRUCTURES)})-{_TAG}\.faiss)"
    rf"(?:\.tmp-[0-9a-f-]+)?$|^\.{re.escape(MANIFEST)}\.tmp-[0-9a-f-]+$"
)
_LOAD_ATTEMPTS = 20
_log = logging.getLogger(__name__)


class IndexLockedError(SbertError, TimeoutError):
    """Another process held an index's write lock for longer than this writer would wait."""


class Hit(NamedTuple):
    """One search result: the row's ``id``, its ``score`` (cosine or dot), its ``text`` (or None) and ``row``."""

    id: str
    score: float
    text: str | None
    row: int


def _faiss():
    try:
        import faiss
    except ImportError as err:  # pragma: no cover - faiss-cpu is a dependency
        raise ImportError("approximate and quantised search need faiss: pip install faiss-cpu") from err
    return faiss


def backend_name(encoder) -> str:
    """How an ``Encoder`` makes its vectors, as recorded in an index: ``torch/fp32``, ``onnx/int8``, ..."""
    return encoder.runtime


def _precision(backend: str) -> str:
    return backend.rpartition("/")[2]


# -- reading one version of the index ------------------------------------------------------------------
class _Missing(IndexFormatError):
    """A file the manifest names is not there (a concurrent writer may have replaced the manifest)."""


class _Snapshot:
    """One committed version of an index, opened in full: the manifest, ids and texts in memory, the
    vectors memory-mapped and the structure files held open, so that later writes cannot change it."""

    def __init__(self, path: Path, manifest: dict, signature: tuple | None) -> None:
        self.path, self.manifest, self.signature = path, manifest, signature
        dim = manifest["dim"]
        self.ids: list[str] = []
        self.texts: list[str | None] = []
        parts = []
        for seg in manifest["segments"]:
            parts.append(_read_vectors(path / seg["vectors"], seg["rows"], dim))
            _read_records(path / seg["records"], seg["rows"], self.ids, self.texts)
        self.vectors: np.ndarray = (
            parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
        )
        deleted = manifest.get("deleted")
        self.deleted = _read_deleted(path / deleted, len(self.ids)) if deleted else np.zeros(0, np.int64)
        alive = np.ones(len(self.ids), dtype=bool)
        alive[self.deleted] = False
        self.alive_bits = np.packbits(alive, bitorder="little")
        self.row_of = _live_rows(self.ids, alive, [path / s["records"] for s in manifest["segments"]])
        self._handles: dict[str, IO[bytes]] = {}
        try:
            for name, entry in manifest["structures"].items():
                self._handles[name] = _open(path / entry["file"])
        except BaseException:
            self.close()
            raise
        self._structures: dict[str, Any] = {}
        self._errors: dict[str, IndexFormatError] = {}
        self._lock = threading.Lock()

    @classmethod
    def empty(cls, path: Path, manifest: dict) -> _Snapshot:
        return cls(path, {**manifest, "segments": [], "deleted": None, "structures": {}}, None)

    def structure(self, name: str):
        """The FAISS structure ``name``, read from the file held open since the snapshot was taken."""
        with self._lock:
            if name in self._errors:
                raise self._errors[name]
            if name not in self._structures:
                handle = self._handles.pop(name)
                try:
                    self._structures[name] = _read_structure(
                        handle, self.path / self.manifest["structures"][name]["file"], name, self
                    )
                except IndexFormatError as err:
                    self._errors[name] = err
                    raise
                finally:
                    handle.close()
            return self._structures[name]

    def loaded(self) -> list[str]:
        return list(self._structures)

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def new_ids(self, n: int) -> list[str]:
        numeric = [int(i) for i in self.ids if i.isdigit()]
        start = max(numeric) + 1 if numeric else 0
        return [str(start + i) for i in range(n)]


def _open(file: Path) -> IO[bytes]:
    try:
        return open(file, "rb")
    except FileNotFoundError as err:
        raise _Missing(_missing_message(file)) from err
    except OSError as err:
        raise IndexFormatError(f"{file}: cannot be read ({err.strerror}); the index is damaged") from err


def _missing_message(file: Path) -> str:
    return f"{file}: missing (named in {file.parent / MANIFEST}); the index is damaged"


def _read_vectors(file: Path, rows: int, dim: int) -> np.ndarray:
    try:
        vectors = np.load(file, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError as err:
        raise _Missing(_missing_message(file)) from err
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise _unreadable_npy(file, err) from err
    if not isinstance(vectors, np.ndarray) or vectors.dtype != np.float32 or vectors.shape != (rows, dim):
        got = f"{vectors.dtype} {vectors.shape}" if isinstance(vectors, np.ndarray) else type(vectors).__name__
        raise IndexFormatError(
            f"{file}: expected float32 vectors of shape ({rows}, {dim}) as {MANIFEST} says, got {got}; "
            "the index is damaged"
        )
    return vectors


def _unreadable_npy(file: Path, err: BaseException) -> IndexFormatError:
    reason = "it holds Python objects, not numbers" if "pickle" in str(err) else str(err)
    return IndexFormatError(f"{file}: damaged: not a readable .npy array ({reason}); the index is damaged")


def _read_records(file: Path, rows: int, ids: list[str], texts: list[str | None]) -> None:
    before = len(ids)
    handle = _open(file)
    with handle:
        for number, raw in enumerate(handle, 1):
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise IndexFormatError(f"{file}, line {number}: not a JSON line ({err}); the index is damaged") from err
            text = record.get("text") if isinstance(record, dict) else None
            if (
                not isinstance(record, dict)
                or not isinstance(record.get("id"), str)
                or not isinstance(text, str | None)
            ):
                raise IndexFormatError(
                    f"{file}, line {number}: expected a JSON object with a string 'id' and an optional string "
                    "'text'; the index is damaged"
                )
            ids.append(record["id"])
            texts.append(text)
    if len(ids) - before != rows:
        raise IndexFormatError(
            f"{file}: {len(ids) - before} records for {rows} vectors ({MANIFEST}); the index is damaged"
        )


def _read_deleted(file: Path, rows: int) -> np.ndarray:
    try:
        deleted = np.load(file, allow_pickle=False)
    except FileNotFoundError as err:
        raise _Missing(_missing_message(file)) from err
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise _unreadable_npy(file, err) from err
    if not isinstance(deleted, np.ndarray) or deleted.ndim != 1 or deleted.dtype.kind not in "iu":
        got = f"{deleted.dtype} {deleted.shape}" if isinstance(deleted, np.ndarray) else type(deleted).__name__
        raise IndexFormatError(
            f"{file}: expected a list of deleted row numbers (int64), got {got}; the index is damaged"
        )
    if len(deleted) and (deleted.min() < 0 or deleted.max() >= rows):
        bad = int(deleted.max()) if deleted.max() >= rows else int(deleted.min())
        raise IndexFormatError(
            f"{file}: deleted row {bad} is outside the index's {rows} rows (0 to {rows - 1}); the index is damaged"
        )
    return deleted.astype(np.int64)


def _live_rows(ids: list[str], alive: np.ndarray, record_files: list[Path]) -> dict[str, int]:
    """Row of each live id; two live rows with one id mean a damaged index (deleted ids may come back)."""
    row_of: dict[str, int] = {}
    for row in np.flatnonzero(alive).tolist():
        id_ = ids[row]
        if id_ in row_of:
            files = ", ".join(str(f) for f in record_files)
            raise IndexFormatError(
                f"id {id_!r} is on two live rows ({row_of[id_]} and {row}) in {files}; the index is damaged"
            )
        row_of[id_] = row
    return row_of


def _read_structure(handle: IO[bytes], file: Path, name: str, snap: _Snapshot):
    """Read a FAISS structure from an open file, checking it is the kind, width and size the index needs."""
    faiss = _faiss()
    reader = faiss.PyCallbackIOReader(handle.read)
    try:
        index = faiss.read_index_binary(reader) if name == "binary" else faiss.read_index(reader)
    except (RuntimeError, MemoryError, ValueError) as err:
        reason = re.sub(r"^Error in .*? at \S+:\d+: (Error: )?", "", str(err).strip().splitlines()[-1])[:160]
        raise IndexFormatError(f"{file}: unreadable {name} structure ({reason}); the index is damaged") from err
    kind = {"hnsw": faiss.IndexHNSW, "int8": faiss.IndexScalarQuantizer, "binary": faiss.IndexBinaryFlat}[name]
    if not isinstance(index, kind):
        raise IndexFormatError(
            f"{file}: holds a {type(index).__name__}, not the {name} structure; the index is damaged"
        )
    if index.d != snap.manifest["dim"] or index.ntotal != len(snap.ids):
        raise IndexFormatError(
            f"{file}: holds {index.ntotal} rows of width {index.d}; the index has {len(snap.ids)} of width "
            f"{snap.manifest['dim']}; the index is damaged"
        )
    return index


def _signature(path: Path) -> tuple | None:
    """What changes whenever manifest.json is replaced (it is replaced by a rename, never rewritten)."""
    try:
        return _stat_key(os.stat(path / MANIFEST))
    except OSError:
        return None


def _stat_key(st: os.stat_result) -> tuple:
    return st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns, st.st_size


def _load(path: Path) -> _Snapshot:
    """The index's current version; re-reads the manifest when a writer replaced it while files were opened."""
    for _ in range(_LOAD_ATTEMPTS):
        file = path / MANIFEST
        try:
            with open(file, "rb") as handle:
                signature = _stat_key(os.fstat(handle.fileno()))
                raw = handle.read()
        except FileNotFoundError as err:
            raise IndexFormatError(
                f"{path}: not an sbert index ({MANIFEST} missing); build one with `sbert index build`"
            ) from err
        except OSError as err:
            raise IndexFormatError(f"{file}: cannot be read ({err.strerror})") from err
        try:
            return _Snapshot(path, _parse_manifest(file, raw), signature)
        except _Missing:
            if _signature(path) == signature:
                raise  # the manifest did not change: the file really is missing
    raise IndexFormatError(f"{path}: the index changed {_LOAD_ATTEMPTS} times while it was being read; try again")


# -- the index -------------------------------------------------------------------------------------------
class VectorIndex:
    """Vectors with ids and texts in a folder. ``build`` makes one, ``open`` reads one, then
    ``add``/``delete``/``search``. Searching is exact unless an ``hnsw``, ``int8`` or ``binary``
    structure was built (``ann=True``, ``quantization=``) or asked for (``method=``).

    The object shows one version of the index (``ids``, ``manifest``, ``len`` ...); ``search`` and
    ``refresh`` move it to the newest one when another process has written to the folder, and its own
    writes move it to theirs. Safe to search from several threads.
    """

    def __init__(self, path: Path, snapshot: _Snapshot, lock_timeout: float = LOCK_TIMEOUT) -> None:
        self.path, self._snap, self.lock_timeout = path, snapshot, lock_timeout
        self._progress: bool | None = None
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
        return cls(path, _load(path), lock_timeout)

    @property
    def manifest(self) -> dict:
        return self._snap.manifest

    @property
    def ids(self) -> list[str]:
        return self._snap.ids

    @property
    def texts(self) -> list[str | None]:
        return self._snap.texts

    @property
    def vectors(self) -> np.ndarray:
        return self._snap.vectors

    @property
    def deleted(self) -> np.ndarray:
        return self._snap.deleted

    @property
    def row_of(self) -> dict[str, int]:
        return self._snap.row_of

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
    def structures(self) -> list[str]:
        return list(self.manifest["structures"])

    def __len__(self) -> int:
        return len(self.ids) - len(self.deleted)

    def refresh(self) -> bool:
        """Move to the newest version on disk if another process wrote one; True if it did.

        A new version that cannot be used (damaged, or another model, width or metric) is skipped with
        a warning and the current one kept, so that a long-lived reader never fails because of a write.
        """
        snap = self._snap
        signature = _signature(self.path)
        if signature is None or signature in (snap.signature, self._skipped):
            return False
        with self._reload_lock:
            if self._snap is not snap:
                return True  # another thread loaded it
            try:
                new = _load(self.path)
                for key in ("model", "dim", "metric"):
                    if new.manifest[key] != snap.manifest[key]:
                        raise IndexMismatchError(
                            f"its {key} changed from {snap.manifest[key]!r} to {new.manifest[key]!r}"
                        )
                for name in snap.loaded():
                    if name in new.manifest["structures"]:
                        new.structure(name)
            except SbertError as err:
                self._skipped = signature
                warnings.warn(f"{self.path}: keeping the version already loaded; the new one: {err}", stacklevel=2)
                return False
            self._snap = new
            return True

    def _current(self) -> _Snapshot:
        self.refresh()
        return self._snap

    # -- model checks ----------------------------------------------------------------------------------
    def check_model(self, name_or_path: str | Path, dim: int | None = None) -> None:
        """Raise IndexMismatchError unless ``name_or_path`` (and ``dim``) is the model the index was built with."""
        from sbert.registry import canonical_name, resolve

        same = canonical_name(name_or_path) == self.model
        if not same and self.manifest.get("model_path"):
            with contextlib.suppress(Exception):
                same = str(resolve(name_or_path).resolve()) == self.manifest["model_path"]
        if not same:
            raise IndexMismatchError(
                f"index {self.path} was built with model {self.model!r} (dim {self.dim}); "
                f"refusing to use it with {str(name_or_path)!r}: embeddings of different models are not comparable"
            )
        if dim is not None and dim != self.dim:
            raise IndexMismatchError(f"index {self.path} holds {self.dim}-dim vectors; the model gives {dim}")

    def check_backend(self, backend: str | None, allow_mixed: bool = False) -> None:
        """Raise IndexMismatchError if vectors made by ``backend`` (``torch/fp32``, ``onnx/int8``, ...; see
        ``backend_name``) are not comparable with the index's own. Only the precision counts (fp32 vectors
        agree across backends to ~1e-6; bf16 and int8 ones do not). Nothing is checked where either side
        is unknown (None; indexes of older sbert versions) or the index is already mixed."""
        _check_backend(self.path, self.manifest, backend, allow_mixed)

    @staticmethod
    def _prepare(embeddings: Array, manifest: dict, path: Path) -> np.ndarray:
        x = as_tensor(embeddings).float().cpu().numpy()
        if x.shape[1] != manifest["dim"]:
            raise IndexMismatchError(
                f"index {path} holds {manifest['dim']}-dim vectors (model {manifest['model']!r}); got {x.shape[1]}-dim"
            )
        if not np.isfinite(x).all():
            raise ValueError("embeddings contain NaN or infinite values")
        return _normalized(x) if manifest["metric"] == "cosine" else np.ascontiguousarray(x, dtype=np.float32)

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
    ) -> list[list[Hit]]:
        """The best ``k`` live rows for each query embedding, best first (see ``search_rows``)."""
        snap = self._current()
        found = self._search(snap, queries, k, method, ef_search, rescore, backend, allow_mixed_backend)
        return [
            [Hit(snap.ids[r], float(s), snap.texts[r], int(r)) for s, r in zip(srow, rrow, strict=True) if r >= 0]
            for srow, rrow in zip(found.scores, found.indices, strict=True)
        ]

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

    def _search(self, snap, queries, k, method, ef_search, rescore, backend, allow_mixed_backend) -> TopK:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        _check_backend(self.path, snap.manifest, backend, allow_mixed_backend)
        q = self._prepare(queries, snap.manifest, self.path)
        method = method or _default_method(snap.manifest)
        if method == "exact":
            return _exact(snap, q, k)
        if method not in STRUCTURES:
            raise ValueError(f"unknown search method {method!r}; expected exact, {', '.join(STRUCTURES)}")
        if method not in snap.manifest["structures"]:
            have = ", ".join(snap.manifest["structures"]) or "none"
            raise ValueError(f"index {self.path} has no {method!r} structure; it has: {have}")
        faiss = _faiss()
        index = snap.structure(method)
        fetch = k if method == "hnsw" else k * (rescore or DEFAULT_RESCORE[method])
        fetch = max(1, min(fetch, len(snap.ids)))
        params = faiss.SearchParametersHNSW() if method == "hnsw" else faiss.SearchParameters()
        if method == "hnsw":
            params.efSearch = max(ef_search or snap.manifest["structures"]["hnsw"]["ef_search"], fetch)
        if len(snap.deleted):
            params.sel = faiss.IDSelectorBitmap(len(snap.ids), faiss.swig_ptr(snap.alive_bits))
        with _faiss_threads(1 if len(q) < 16 else None):
            if method == "binary":
                dist, rows = index.search(_sign_bits(q), fetch, params=params)
                scores = -dist.astype(np.float32)  # fewer differing bits = more similar
            else:
                scores, rows = index.search(q, fetch, params=params)
        if method != "hnsw" and (rescore or DEFAULT_RESCORE[method]) > 1:
            scores = np.where(rows >= 0, np.einsum("qd,qkd->qk", q, snap.vectors[np.maximum(rows, 0)]), -np.inf)
        return _pad(*_best(scores.astype(np.float32), rows.astype(np.int64), k), k)

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
    ) -> VectorIndex:
        """Write a new index at ``path`` from (n, dim) embeddings made by ``model`` (a name or folder).

        ``ids`` default to "0", "1", ...; ``texts`` are stored when given. ``ann`` adds an HNSW graph
        (FAISS; ``hnsw_m`` links per node, ``ef_construction``, ``ef_search``); ``quantization`` adds an
        ``int8`` or ``binary`` scan structure. ``backend`` records how the embeddings were made
        (``backend_name(encoder)``, e.g. ``torch/fp32``) so that vectors of another precision are refused
        later. ``path`` must be new, empty, or an index (replaced only with ``overwrite``): a folder of
        other files is refused. ``show_progress``: a bar while building structures (default: on a
        terminal, 100k rows or more).
        """
        from sbert.registry import canonical_name, resolve

        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        if quantization not in (None, "int8", "binary"):
            raise ValueError(f"quantization must be 'int8' or 'binary', got {quantization!r}")
        path = Path(path)
        cls.check_target(path, overwrite)
        x = as_tensor(embeddings).float().cpu().numpy()
        if quantization == "binary" and x.shape[1] % 8:
            raise ValueError(f"binary quantisation needs a dimension divisible by 8, got {x.shape[1]}")
        model_path = None
        with contextlib.suppress(Exception):
            model_path = str(resolve(model).resolve())
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "model": canonical_name(model),
            "model_path": model_path,
            "backend": backend,
            "dim": int(x.shape[1]),
            "metric": metric,
            "segments": [],
            "deleted": None,
            "structures": {},
            "created": _now(),
        }
        if ann:
            manifest["structures"]["hnsw"] = {"M": hnsw_m, "ef_construction": ef_construction, "ef_search": ef_search}
        if quantization:
            manifest["structures"][quantization] = {}
        path.mkdir(parents=True, exist_ok=True)
        index = cls(path, _Snapshot.empty(path, manifest), lock_timeout)
        index._progress = show_progress
        with index._writing(refresh=False):
            cls.check_target(path, overwrite)  # again, under the lock: another process may have built one
            index._rebuild(manifest, cls._prepare(x, manifest, path), ids, texts)
        return index

    @staticmethod
    def check_target(path: str | Path, overwrite: bool = False) -> None:
        """Raise unless ``build`` may write to ``path`` (call it before costly encoding): IndexExistsError
        for an index without ``overwrite``, FolderNotReplaceableError for a folder of other files."""
        path = Path(path)
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            raise IndexExistsError(f"{path}: exists and is not a folder")
        if not path.is_dir():
            return
        if not _holds_index(path):
            others = sorted(p.name for p in path.iterdir() if not _is_index_file(p.name))
            if others:
                sample = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
                raise FolderNotReplaceableError(
                    f"{path}: a folder that holds other files ({sample}) and no sbert index; refusing to build "
                    "an index there: choose a new or empty folder"
                )
        if (path / MANIFEST).exists() and not overwrite:
            raise IndexExistsError(
                f"{path}: an index is already there; pass overwrite=True (--overwrite) to replace it"
            )

    def add(
        self,
        embeddings: Array,
        ids: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
        show_progress: bool | None = None,
        *,
        backend: str | None = None,
        allow_mixed_backend: bool = False,
    ) -> None:
        """Append rows (ids default to consecutive numbers after the largest numeric id).

        Waits for another process's write to finish, then adds to the newest version. ``backend``: how
        the embeddings were made (see ``check_backend``); another precision is refused unless
        ``allow_mixed_backend``, and the index then records ``mixed``.
        """
        self._progress = show_progress
        with self._writing():
            snap = self._snap
            self.check_backend(backend, allow_mixed_backend)
            recorded = snap.manifest.get("backend")
            if recorded and backend and _precision(recorded) != _precision(backend):
                recorded = MIXED
            self._append(snap, self._prepare(embeddings, snap.manifest, self.path), ids, texts, recorded)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete rows by id; returns how many. Unknown ids raise KeyError naming them. Rewrites the index
        without deleted rows once they pass a quarter of it."""
        ids = [str(i) for i in ids]
        with self._writing():
            snap = self._snap
            missing = [i for i in ids if i not in snap.row_of]
            if missing:
                more = " ..." if len(missing) > 5 else ""
                raise KeyError(f"index {self.path} has no live rows with ids {missing[:5]}{more}")
            rows = np.unique([snap.row_of[i] for i in ids]).astype(np.int64)
            deleted = np.union1d(snap.deleted, rows).astype(np.int64)
            if len(deleted) > COMPACT_AT * len(snap.ids):
                self._compact(snap, deleted)
            else:
                name = f"deleted-{_tag()}.npy"
                with atomic_file(self.path / name) as handle:
                    np.save(handle, deleted)
                self._commit({**snap.manifest, "deleted": name, "updated": _now()})
        return len(rows)

    def compact(self) -> None:
        """Rewrite the index as one segment without deleted rows, rebuilding its structures."""
        with self._writing():
            self._compact(self._snap, self._snap.deleted)

    def _compact(self, snap: _Snapshot, deleted: np.ndarray) -> None:
        keep = np.setdiff1d(np.arange(len(snap.ids)), deleted)
        vectors = np.ascontiguousarray(snap.vectors[keep])
        ids, texts = [snap.ids[r] for r in keep], [snap.texts[r] for r in keep]
        self._rebuild(snap.manifest, vectors, ids, texts)

    def _rebuild(self, manifest: dict, x: np.ndarray, ids: Sequence[str] | None, texts: Sequence[str] | None) -> None:
        """Write ``x`` as the index's only segment, with its structures made anew."""
        ids = [str(i) for i in range(len(x))] if ids is None else [str(i) for i in ids]
        _check_rows(x, ids, texts, {})
        tag = _tag()
        seg = self._write_segment(tag, x, ids, texts)
        structures = {}
        for name, entry in manifest["structures"].items():
            config = {key: value for key, value in entry.items() if key != "file"}
            structures[name] = {**config, "file": f"{name}-{tag}.faiss"}
            self._save_structure(self._make(name, config, x), name, self.path / structures[name]["file"])
        self._commit({**manifest, "segments": [seg], "deleted": None, "structures": structures, "updated": _now()})

    def _append(self, snap: _Snapshot, x: np.ndarray, ids, texts, backend: str | None) -> None:
        ids = snap.new_ids(len(x)) if ids is None else [str(i) for i in ids]
        _check_rows(x, ids, texts, snap.row_of)
        tag = _tag()
        seg = self._write_segment(tag, x, ids, texts)
        structures = {}
        for name, entry in snap.manifest["structures"].items():
            # A private copy read from disk (we hold the lock, so the file is there): the snapshot's own
            # copy may be serving searches, and must stay as it was if this write fails.
            with _open(self.path / entry["file"]) as handle:
                index = _read_structure(handle, self.path / entry["file"], name, snap)
            structures[name] = {**entry, "file": f"{name}-{tag}.faiss"}
            self._save_structure(self._add_to(index, name, x), name, self.path / structures[name]["file"])
        segments = [*snap.manifest["segments"], seg]
        manifest = {**snap.manifest, "segments": segments, "structures": structures, "updated": _now()}
        if backend is not None or "backend" in manifest:
            manifest["backend"] = backend
        self._commit(manifest)

    def _write_segment(self, tag: str, x: np.ndarray, ids: list[str], texts: Sequence[str] | None) -> dict:
        seg = {"vectors": f"seg-{tag}.npy", "records": f"seg-{tag}.jsonl", "rows": len(x)}
        with atomic_file(self.path / seg["vectors"]) as handle:
            np.save(handle, x)
        with atomic_file(self.path / seg["records"], "w", encoding="utf-8") as handle:
            for i, id_ in enumerate(ids):
                record = {"id": id_} if texts is None else {"id": id_, "text": texts[i]}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        return seg

    def _make(self, name: str, entry: dict, vectors: np.ndarray):
        faiss = _faiss()
        dim = vectors.shape[1]
        if name == "hnsw":
            index = faiss.IndexHNSWFlat(dim, entry["M"], faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = entry["ef_construction"]
        elif name == "int8":
            index = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)  # per-dimension ranges from the vectors at build time
        else:
            index = faiss.IndexBinaryFlat(dim)
        return self._add_to(index, name, vectors)

    def _add_to(self, index, name: str, x: np.ndarray, chunk: int = 16384):
        import sys

        from tqdm.auto import tqdm

        show = self._progress if self._progress is not None else (len(x) >= 100_000 and sys.stderr.isatty())
        with tqdm(total=len(x), desc=f"building {name}", unit="vec", disable=not show) as bar:
            for start in range(0, len(x), chunk):
                part = x[start : start + chunk]
                index.add(_sign_bits(part) if name == "binary" else part)
                bar.update(len(part))
        return index

    @staticmethod
    def _save_structure(index, name: str, file: Path) -> None:
        faiss = _faiss()
        data = faiss.serialize_index_binary(index) if name == "binary" else faiss.serialize_index(index)
        with atomic_file(file) as handle:
            handle.write(data.tobytes())

    def _commit(self, manifest: dict) -> None:
        _write_manifest(self.path, manifest)
        self._snap = _load(self.path)
        self._collect_garbage()

    @contextlib.contextmanager
    def _writing(self, refresh: bool = True) -> Iterator[None]:
        """Hold the folder's write lock (waiting up to ``lock_timeout`` s), with the newest version loaded
        (``refresh``); on failure, reload what is on disk (the last committed version)."""
        self.path.mkdir(parents=True, exist_ok=True)
        file = self.path / LOCK
        with open(file, "a+", encoding="utf-8") as lock:
            _acquire(lock, file, self.lock_timeout)
            try:
                lock.seek(0)
                lock.truncate()
                lock.write(f"{os.getpid()}\n")
                lock.flush()
                if refresh and _signature(self.path) != self._snap.signature:
                    self._snap = _load(self.path)
                yield
            except BaseException:
                if (self.path / MANIFEST).is_file():
                    with contextlib.suppress(SbertError):
                        self._snap = _load(self.path)
                raise
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _collect_garbage(self) -> None:
        """Remove sbert's index files that the manifest no longer names (only while holding the lock)."""
        named = {s[k] for s in self.manifest["segments"] for k in ("vectors", "records")}
        named |= {e["file"] for e in self.manifest["structures"].values()}
        if self.manifest.get("deleted"):
            named.add(self.manifest["deleted"])
        for file in self.path.iterdir():
            if _OWN_FILE.match(file.name) and file.name not in named and file.is_file():
                file.unlink(missing_ok=True)


def _check_rows(x: np.ndarray, ids: list[str], texts: Sequence[str] | None, row_of: dict[str, int]) -> None:
    n = len(x)
    if len(ids) != n or (texts is not None and len(texts) != n):
        raise ValueError(f"{n} embeddings but {len(ids)} ids and {len(texts) if texts is not None else 0} texts")
    if texts is not None and not all(isinstance(t, str | None) for t in texts):
        raise ValueError("texts must be strings (or None)")
    clash = [i for i in dict.fromkeys(ids) if i in row_of]
    if clash or len(set(ids)) != n:
        dupes = clash or [i for i, count in _counts(ids).items() if count > 1]
        raise ValueError(f"ids must be unique in the index; repeated: {dupes[:5]}")


def _counts(items: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def _check_backend(path: Path, manifest: dict, backend: str | None, allow_mixed: bool) -> None:
    recorded = manifest.get("backend")
    if not recorded or not backend or recorded == MIXED or allow_mixed:
        return
    if _precision(recorded) != _precision(backend):
        raise IndexMismatchError(
            f"index {path} holds vectors made with {recorded}; these are made with {backend}: vectors of another "
            f"precision are not comparable enough to mix. Embed with the index's backend and precision "
            f"(--backend/--precision), or pass allow_mixed_backend=True (--allow-mixed-backend) to use them anyway"
        )


def _acquire(lock: IO[str], file: Path, timeout: float) -> None:
    """Take the exclusive lock on ``file``, waiting up to ``timeout`` seconds for its holder to finish."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    holder = _holder(file)
    if timeout > 0:
        _log.warning(
            "%s: another writer (%s) holds the lock %s; waiting up to %g s for it to finish",
            file.parent,
            holder,
            file,
            timeout,
        )
    deadline, delay = time.monotonic() + timeout, 0.02
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise IndexLockedError(
                    f"{file.parent}: another writer ({holder}) still holds the lock {file} after {timeout:g} s; "
                    "try again when it has finished, or wait longer (lock_timeout=, --lock-timeout)"
                ) from None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.5)


def _holder(file: Path) -> str:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return f"process {int(file.read_text(encoding='utf-8').split()[0])}"
    return "another process"


def _holds_index(path: Path) -> bool:
    """True if ``path`` holds an sbert index: its manifest says so, or every file in it is an index file."""
    with contextlib.suppress(OSError, ValueError):
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        if isinstance(manifest, dict) and manifest.get("format") == FORMAT:
            return True
    return all(_is_index_file(p.name) for p in path.iterdir())


def _is_index_file(name: str) -> bool:
    return name in (MANIFEST, LOCK) or bool(_OWN_FILE.match(name))


@contextlib.contextmanager
def _faiss_threads(threads: int | None) -> Iterator[None]:
    """Run FAISS with ``threads`` OpenMP threads (None: unchanged). A few queries run faster on one
    thread: waking the others costs more than they save, and far more on a busy machine."""
    if threads is None:
        yield
        return
    faiss = _faiss()
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _default_method(manifest: dict) -> str:
    for name in STRUCTURES:
        if name in manifest["structures"]:
            return name
    return "exact"


def _exact(snap: _Snapshot, q: np.ndarray, k: int) -> TopK:
    if not len(snap.deleted):
        return _pad(*semantic_search(q, snap.vectors, k, score="dot"), k)
    found = semantic_search(q, snap.vectors, min(k + len(snap.deleted), len(snap.ids)), score="dot")
    dead = np.isin(found.indices, snap.deleted)
    return _pad(*_best(np.where(dead, -np.inf, found.scores), np.where(dead, -1, found.indices), k), k)


def _write_manifest(path: Path, manifest: dict) -> None:
    with atomic_file(path / MANIFEST, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1)


def _parse_manifest(file: Path, raw: bytes) -> dict:
    """The manifest in ``raw``, checked key by key; IndexFormatError names the file and the key at fault."""
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise IndexFormatError(f"{file}: malformed JSON: {err}") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise IndexFormatError(f"{file}: not an sbert vector index manifest (format {FORMAT!r} expected)")
    if manifest.get("version") != VERSION:
        raise IndexFormatError(f"{file}: index format version {manifest.get('version')}; this sbert reads {VERSION}")
    for key in ("model", "dim", "metric", "segments", "structures"):
        if key not in manifest:
            raise IndexFormatError(f"{file}: missing {key!r}")

    def check(ok: bool, key: str, expected: str, value) -> None:
        if not ok:
            shown = json.dumps(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise IndexFormatError(f"{file}: {key!r} must be {expected}, got {shown}; the index is damaged")

    check(isinstance(manifest["model"], str) and bool(manifest["model"]), "model", "a model name", manifest["model"])
    check(_positive_int(manifest["dim"]), "dim", "a positive integer", manifest["dim"])
    check(manifest["metric"] in METRICS, "metric", " or ".join(METRICS), manifest["metric"])
    for key in ("model_path", "backend"):
        value = manifest.get(key)
        check(value is None or isinstance(value, str), key, "a string or null", value)
    deleted = manifest.get("deleted")
    check(deleted is None or _file_name(deleted), "deleted", "null or a file name in the index folder", deleted)
    segments = manifest["segments"]
    check(isinstance(segments, list), "segments", "a list", segments)
    for n, seg in enumerate(segments):
        check(isinstance(seg, dict), f"segments[{n}]", "an object", seg)
        for key in ("vectors", "records"):
            check(_file_name(seg.get(key)), f"segments[{n}].{key}", "a file name in the index folder", seg.get(key))
        rows = seg.get("rows")
        check(_positive_int(rows) or (rows == 0 and type(rows) is int), f"segments[{n}].rows", "a row count", rows)
    structures = manifest["structures"]
    check(isinstance(structures, dict), "structures", "an object", structures)
    for name, entry in structures.items():
        check(name in STRUCTURES, "structures", f"keyed by {', '.join(STRUCTURES)}", name)
        check(isinstance(entry, dict), f"structures.{name}", "an object", entry)
        check(_file_name(entry.get("file")), f"structures.{name}.file", "a file name in the index folder", entry)
        for key in ("M", "ef_construction", "ef_search") if name == "hnsw" else ():
            check(_positive_int(entry.get(key)), f"structures.hnsw.{key}", "a positive integer", entry.get(key))
    return manifest


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _file_name(value) -> bool:
    """A plain file name: no folder part, so a manifest can only name files inside its own folder."""
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\\" not in value


def _normalized(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms == 0, 1, norms), dtype=np.float32)


def _sign_bits(x: np.ndarray) -> np.ndarray:
    """(n, d) float -> (n, d/8) uint8: one bit per coordinate, set where it is positive."""
    return np.packbits(x > 0, axis=1)


def _best(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best ``k`` by (score desc, row asc); missing entries (row -1) last."""
    scores = np.where(rows < 0, -np.inf, scores)
    order = np.lexsort((np.where(rows < 0, np.iinfo(np.int64).max, rows), -scores), axis=-1)[:, :k]
    return np.take_along_axis(scores, order, 1), np.take_along_axis(rows, order, 1)


def _pad(scores: np.ndarray, rows: np.ndarray, k: int) -> TopK:
    """Widen to ``k`` columns with (-inf, -1), and mark -inf entries as missing."""
    if scores.shape[1] < k:
        extra = k - scores.shape[1]
        scores = np.hstack([scores, np.full((len(scores), extra), -np.inf, np.float32)])
        rows = np.hstack([rows, np.full((len(rows), extra), -1, np.int64)])
    rows = np.where(np.isneginf(scores), -1, rows)
    return TopK(scores.astype(np.float32), rows.astype(np.int64))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tag() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:8]
