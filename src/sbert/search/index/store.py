"""The segment store: an index folder's files and manifest, and the rules that keep them safe to share.

A folder holds::

    manifest.json            model, backend, dimension, metric, and the files below that make up the index
    seg-<tag>.npy            float32 vectors (unit length for cosine), one file per build or add
    seg-<tag>.jsonl          one {"id": ..., "text": ...} line per row of the matching .npy; in an index of
                             documents (manifest "documents") also "doc" (its document's id) and "span"
    deleted-<tag>.npy        deleted row numbers (int64), when any
    <structure>-<tag><suffix> search structures (``sbert.search.index.structures``), opaque to the store
    bm25-<tag>.bm25          the rows' texts for lexical search (manifest "lexical"; ``sbert.search.lexical``)
    .lock                    the writers' lock (holds the process id of the last writer)

Every file of the folder is opened without following links and must be a plain file: a link planted in an
index folder is refused, never read or written through (``sbert.locks`` opens the lock the same way).

Files are never changed once written. A write takes the lock (waiting for another writer, up to
``lock_timeout`` seconds), re-reads the manifest, makes new files, atomically replaces manifest.json,
then removes the files the manifest no longer names; a crash at any point leaves the previous manifest
and every file it names intact, so the index stays readable.

Readers get their grace from the order of those steps: a ``Snapshot`` opens every file a manifest names
(vectors memory-mapped, structure files held open), so the removal of those files cannot break it (on
POSIX systems an open or mapped file outlives its name), and a reader that finds a named file gone
re-reads the manifest, which the writer replaced before removing anything.

The store knows rows, ids, texts and files; what a structure file holds, and how to search it, is the
structures' business: the store names, opens, writes and removes their files.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import stat
import threading
import uuid
import weakref
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

import numpy as np

from sbert.atomic import FolderNotReplaceableError, atomic_file
from sbert.errors import IndexExistsError, IndexFormatError, SbertError
from sbert.locks import check_lock_file, hold_lock

FORMAT = "sbert-vector-index"
VERSION = 1
MANIFEST = "manifest.json"
LOCK = ".lock"
LOCK_TIMEOUT = 600.0  # seconds a writer waits for another one to finish
LEXICAL = "bm25"  # the name of the lexical (BM25) file's kind, beside the search structures
LEXICAL_SUFFIX = ".bm25"
METRICS = ("cosine", "dot")
DOCUMENT_MODES = ("maxp", "mean")  # how an index of documents scores a document by its windows
_TAG = r"\d{14}-[0-9a-f]{8}"
_LOAD_ATTEMPTS = 20
_log = logging.getLogger(__name__)
T = TypeVar("T")


class IndexLockedError(SbertError, TimeoutError):
    """Another process held an index's write lock for longer than this writer would wait."""


class _Missing(IndexFormatError):
    """A file the manifest names is not there (a concurrent writer may have replaced the manifest)."""


# -- one committed version --------------------------------------------------------------------------------
class Snapshot:
    """One committed version of an index, opened in full: the manifest, ids and texts in memory, the
    vectors memory-mapped and the structure files held open, so that later writes cannot change it."""

    def __init__(self, path: Path, manifest: dict, signature: tuple | None) -> None:
        self.path, self.manifest, self.signature = path, manifest, signature
        dim = manifest["dim"]
        self.ids: list[str] = []
        self.texts: list[str | None] = []
        self.docs: list[str | None] = []  # the document of each row, in an index of documents
        self.spans: list[tuple[int, int] | None] = []  # each row's character span of its document
        self.titles: list[str | None] = []  # each row's (its document's) title; None in indexes without titles
        parts = []
        for seg in manifest["segments"]:
            parts.append(_read_vectors(path / seg["vectors"], seg["rows"], dim))
            _read_records(
                path / seg["records"], seg["rows"], Records(self.ids, self.texts, self.docs, self.spans, self.titles)
            )
            if manifest.get("documents") and None in self.docs:
                raise IndexFormatError(
                    f"{path / seg['records']}: a row without 'doc' in an index of documents; damaged"
                )
        self.vectors: np.ndarray = (
            parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
        )
        deleted = manifest.get("deleted")
        self.deleted = _read_deleted(path / deleted, len(self.ids)) if deleted else np.zeros(0, np.int64)
        alive = np.ones(len(self.ids), dtype=bool)
        alive[self.deleted] = False
        self.alive_bits = np.packbits(alive, bitorder="little")  # one bit per row, set where live
        self.row_of = _live_rows(self.ids, alive, [path / s["records"] for s in manifest["segments"]])
        self._files = {name: entry["file"] for name, entry in manifest["structures"].items()}
        if manifest.get("lexical"):
            self._files[LEXICAL] = manifest["lexical"]["file"]
        self._handles: dict[str, IO[bytes]] = {}
        # closes the files when the snapshot is dropped, or at exit (atexit, before modules are torn down:
        # a __del__ run during teardown would find this module's globals set to None)
        self._finalizer = weakref.finalize(self, _close_all, self._handles)
        try:
            for name, file in self._files.items():
                self._handles[name] = _open(path / file)
        except BaseException:
            self.close()
            raise
        self._structures: dict[str, Any] = {}
        self._errors: dict[str, IndexFormatError] = {}
        self._lock = threading.Lock()
        self._derived: dict[str, Any] = {}
        self._derived_lock = threading.RLock()  # one derived value may need another

    @classmethod
    def empty(cls, path: Path, manifest: dict) -> Snapshot:
        """A version with no rows and no structures: what a build starts from."""
        return cls(path, {**manifest, "segments": [], "deleted": None, "structures": {}, "lexical": None}, None)

    def structure(self, name: str, read: Callable[[IO[bytes], Path], T]) -> T:
        """Structure ``name`` (``LEXICAL``: the BM25 file), read once by ``read(handle, file)`` from the file
        held open since the snapshot was taken; a read that failed fails again the same way."""
        with self._lock:
            if name in self._errors:
                raise self._errors[name]
            if name not in self._structures:
                handle = self._handles.pop(name)
                try:
                    self._structures[name] = read(handle, self.path / self._files[name])
                except IndexFormatError as err:
                    self._errors[name] = err
                    raise
                finally:
                    handle.close()
            return self._structures[name]

    def derived(self, name: str, make: Callable[[], T]) -> T:
        """What ``make()`` computes from this version (say, documents' mean vectors), computed once."""
        with self._derived_lock:
            if name not in self._derived:
                self._derived[name] = make()
            return self._derived[name]

    def loaded(self) -> list[str]:
        """Names of the structures read so far."""
        return list(self._structures)

    def close(self) -> None:
        """Close the structure files not read yet."""
        self._finalizer()


def _close_all(handles: dict[str, IO[bytes]]) -> None:
    """Close and forget ``handles`` (a finaliser: uses no module globals, which teardown may have cleared)."""
    while handles:
        handles.popitem()[1].close()


# -- the folder --------------------------------------------------------------------------------------------
class SegmentStore:
    """An index folder: reading and committing versions, under a lock that writers wait for (``locked``).

    ``structures``: the structure kinds a manifest may name, each with the settings it records as
    positive integers; their files are ``<kind>-<tag><suffix>``.
    """

    def __init__(self, path: str | Path, structures: Mapping[str, Sequence[str]], suffix: str) -> None:
        self.path, self.structures, self.suffix = Path(path), structures, suffix
        kinds = "|".join(map(re.escape, structures))
        self._own_file = re.compile(
            rf"^\.?(?:seg-{_TAG}\.(?:npy|jsonl)|deleted-{_TAG}\.npy|(?:{kinds})-{_TAG}{re.escape(suffix)}"
            rf"|{LEXICAL}-{_TAG}{re.escape(LEXICAL_SUFFIX)})"
            rf"(?:\.tmp-[0-9a-f-]+)?$|^\.{re.escape(MANIFEST)}\.tmp-[0-9a-f-]+$"
        )

    # -- reading ---------------------------------------------------------------------------------------
    def load(self) -> Snapshot:
        """The current version; re-reads the manifest when a writer replaced it while files were opened."""
        check_lock_file(self.path / LOCK, IndexFormatError)  # a planted link is refused before any write
        for _ in range(_LOAD_ATTEMPTS):
            signature, raw = self._read_manifest()
            try:
                return Snapshot(self.path, self.parse(raw), signature)
            except _Missing:
                if self.signature() == signature:
                    raise  # the manifest did not change: the file really is missing
        raise IndexFormatError(
            f"{self.path}: the index changed {_LOAD_ATTEMPTS} times while it was being read; try again"
        )

    def _read_manifest(self) -> tuple[tuple, bytes]:
        file = self.path / MANIFEST
        try:
            handle = _open(file)
        except _Missing as err:
            raise IndexFormatError(
                f"{self.path}: not an sbert index ({MANIFEST} missing); build one with `sbert index build`"
            ) from err
        with handle:
            try:
                return _stat_key(os.fstat(handle.fileno())), handle.read()
            except OSError as err:
                raise IndexFormatError(f"{file}: cannot be read ({err.strerror})") from err

    def signature(self) -> tuple | None:
        """What changes whenever manifest.json is replaced (it is replaced by a rename, never rewritten)."""
        try:
            return _stat_key(os.stat(self.path / MANIFEST))
        except OSError:
            return None

    def parse(self, raw: bytes) -> dict:
        """The manifest in ``raw``, checked key by key; IndexFormatError names the file and the key at fault."""
        file = self.path / MANIFEST
        manifest = _manifest_object(file, raw)
        check = _checker(file)
        _check_metadata(manifest, check)
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
            check(name in self.structures, "structures", f"keyed by {', '.join(self.structures)}", name)
            check(isinstance(entry, dict), f"structures.{name}", "an object", entry)
            check(_file_name(entry.get("file")), f"structures.{name}.file", "a file name in the index folder", entry)
            for key in self.structures[name]:
                check(_positive_int(entry.get(key)), f"structures.{name}.{key}", "a positive integer", entry.get(key))
        _check_documents(manifest, check)
        return manifest

    def open(self, name: str) -> IO[bytes]:
        """The file ``name`` of the folder, opened for reading; IndexFormatError if it cannot be."""
        return _open(self.path / name)

    # -- writing ---------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
        """Hold the folder's write lock, waiting up to ``timeout`` seconds for another writer to finish."""
        self.path.mkdir(parents=True, exist_ok=True)
        file = self.path / LOCK
        with hold_lock(file, timeout, lambda holder: _locked_error(file, holder, timeout), _log, IndexFormatError):
            yield

    def newest(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` if it is still the committed version, else the committed one (re-read under the lock)."""
        return snapshot if self.signature() == snapshot.signature else self.load()

    def recover(self, snapshot: Snapshot) -> Snapshot:
        """After a failed write: the last committed version, or ``snapshot`` where none can be read."""
        if (self.path / MANIFEST).is_file():
            with contextlib.suppress(SbertError):
                return self.load()
        return snapshot

    def write_segment(
        self,
        tag: str,
        x: np.ndarray,
        ids: Sequence[str],
        texts: Sequence[str | None] | None,
        docs: Sequence[str] | None = None,
        spans: Sequence[tuple[int, int]] | None = None,
        titles: Sequence[str | None] | None = None,
    ) -> dict:
        """Write rows ``x`` with their ids (and texts; and, for windows of documents, each row's document
        and character span) as a new segment; returns its manifest entry."""
        seg = {"vectors": f"seg-{tag}.npy", "records": f"seg-{tag}.jsonl", "rows": len(x)}
        with atomic_file(self.path / seg["vectors"]) as handle:
            np.save(handle, x)
        with atomic_file(self.path / seg["records"], "w", encoding="utf-8") as handle:
            for i, id_ in enumerate(ids):
                record: dict[str, Any] = {"id": id_} if texts is None else {"id": id_, "text": texts[i]}
                if docs is not None:
                    record["doc"] = docs[i]
                    record["span"] = [int(spans[i][0]), int(spans[i][1])] if spans is not None else None
                if titles is not None and titles[i] is not None:
                    record["title"] = titles[i]
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        return seg

    def write_deleted(self, rows: np.ndarray) -> str:
        """Write the deleted row numbers as a new file; returns its name for the manifest."""
        name = f"deleted-{new_tag()}.npy"
        with atomic_file(self.path / name) as handle:
            np.save(handle, rows.astype(np.int64))
        return name

    def write_structure(self, kind: str, tag: str, data: bytes) -> str:
        """Write a structure's bytes (``kind`` ``LEXICAL``: the BM25 file) as a new file; returns its name."""
        name = f"{kind}-{tag}{LEXICAL_SUFFIX if kind == LEXICAL else self.suffix}"
        with atomic_file(self.path / name) as handle:
            handle.write(data)
        return name

    def commit(self, manifest: dict) -> Snapshot:
        """Make ``manifest`` the index's version, then remove the files it does not name (hold the lock)."""
        _write_manifest(self.path, manifest)
        snapshot = self.load()
        self.collect_garbage(snapshot.manifest)
        return snapshot

    def collect_garbage(self, manifest: dict) -> None:
        """Remove the store's own files that ``manifest`` does not name (only while holding the lock)."""
        named = {s[k] for s in manifest["segments"] for k in ("vectors", "records")}
        named |= {e["file"] for e in manifest["structures"].values()}
        if manifest.get("lexical"):
            named.add(manifest["lexical"]["file"])
        if manifest.get("deleted"):
            named.add(manifest["deleted"])
        for file in self.path.iterdir():
            if self._own_file.match(file.name) and file.name not in named and file.is_file():
                file.unlink(missing_ok=True)

    # -- the folder itself -----------------------------------------------------------------------------
    def check_target(self, overwrite: bool = False) -> None:
        """Raise unless a new index may be written here: IndexExistsError for an index without
        ``overwrite``, FolderNotReplaceableError for a folder of other files."""
        path = self.path
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            raise IndexExistsError(f"{path}: exists and is not a folder")
        if not path.is_dir():
            return
        check_lock_file(path / LOCK, IndexFormatError)
        if not self._holds_index():
            others = sorted(p.name for p in path.iterdir() if not self._is_own(p.name))
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

    def _holds_index(self) -> bool:
        """True if the folder holds an sbert index: its manifest says so, or every file in it is the store's."""
        with contextlib.suppress(OSError, ValueError):
            manifest = json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))
            if isinstance(manifest, dict) and manifest.get("format") == FORMAT:
                return True
        return all(self._is_own(p.name) for p in self.path.iterdir())

    def _is_own(self, name: str) -> bool:
        return name in (MANIFEST, LOCK) or bool(self._own_file.match(name))


def new_manifest(*, model: str, model_path: str | None, backend: str | None, dim: int, metric: str) -> dict:
    """The manifest of an index with no rows and no structures yet."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": model,
        "model_path": model_path,
        "backend": backend,
        "dim": dim,
        "metric": metric,
        "segments": [],
        "deleted": None,
        "structures": {},
        "created": now(),
    }


def now() -> str:
    """The time, as the manifest records it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_tag() -> str:
    """A fresh tag for the files of one write: its time, then random digits."""
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:8]


# -- reading files -----------------------------------------------------------------------------------------
def _open(file: Path) -> IO[bytes]:
    """``file`` opened for reading: a plain file of the folder, never through a link."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as err:
        raise _Missing(_missing_message(file)) from err
    except OSError as err:
        if os.path.islink(file):
            raise IndexFormatError(_link_message(file)) from err
        raise IndexFormatError(f"{file}: cannot be read ({err.strerror}); the index is damaged") from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IndexFormatError(f"{file}: is not a plain file; the index is damaged")
    return os.fdopen(fd, "rb")


def _link_message(file: Path) -> str:
    return (
        f"{file}: is a symbolic link; the files of an index must be plain files inside its folder, "
        "and sbert does not read or write through links there"
    )


def _missing_message(file: Path) -> str:
    return f"{file}: missing (named in {file.parent / MANIFEST}); the index is damaged"


def _load_npy(file: Path, mmap: bool) -> Any:
    with _open(file) as handle:
        try:
            return _memory_map(handle) if mmap else np.load(handle, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
            reason = "it holds Python objects, not numbers" if "pickle" in str(err) else str(err)
            raise IndexFormatError(
                f"{file}: damaged: not a readable .npy array ({reason}); the index is damaged"
            ) from err


def _memory_map(handle: IO[bytes]) -> np.ndarray:
    """The .npy array in the open ``handle``, memory-mapped (the map outlives the handle)."""
    version = np.lib.format.read_magic(handle)
    read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in read_header:
        raise ValueError(f".npy format version {version[0]}.{version[1]} (1.0 or 2.0 expected)")
    shape, fortran, dtype = read_header[version](handle)
    if dtype.hasobject:
        raise ValueError("pickle: Python objects in the array")
    return np.memmap(handle, dtype=dtype, mode="r", offset=handle.tell(), shape=shape, order="F" if fortran else "C")


def _shown(value: Any) -> str:
    return f"{value.dtype} {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__


def _read_vectors(file: Path, rows: int, dim: int) -> np.ndarray:
    vectors = _load_npy(file, mmap=True)
    if not isinstance(vectors, np.ndarray) or vectors.dtype != np.float32 or vectors.shape != (rows, dim):
        raise IndexFormatError(
            f"{file}: expected float32 vectors of shape ({rows}, {dim}) as {MANIFEST} says, got {_shown(vectors)}; "
            "the index is damaged"
        )
    return vectors


class Records(NamedTuple):
    """The per-row lists a segment's records are read into."""

    ids: list[str]
    texts: list[str | None]
    docs: list[str | None]
    spans: list[tuple[int, int] | None]
    titles: list[str | None]


def _read_records(file: Path, rows: int, out: Records) -> None:
    before = len(out.ids)
    with _open(file) as handle:
        for number, raw in enumerate(handle, 1):
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise IndexFormatError(f"{file}, line {number}: not a JSON line ({err}); the index is damaged") from err
            if not _record_ok(record):
                raise IndexFormatError(
                    f"{file}, line {number}: expected a JSON object with a string 'id', an optional string "
                    "'text' and 'title', and optionally a string 'doc' with its 'span' [start, end]; the index is "
                    "damaged"
                )
            span = record.get("span")
            out.ids.append(record["id"])
            out.texts.append(record.get("text"))
            out.docs.append(record.get("doc"))
            out.titles.append(record.get("title"))  # absent in indexes built before titles were kept
            out.spans.append(None if span is None else (span[0], span[1]))
    if len(out.ids) - before != rows:
        raise IndexFormatError(
            f"{file}: {len(out.ids) - before} records for {rows} vectors ({MANIFEST}); the index is damaged"
        )


def _record_ok(record: Any) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        return False
    span = record.get("span")
    good_span = span is None or (
        isinstance(span, list) and len(span) == 2 and all(type(n) is int for n in span) and 0 <= span[0] <= span[1]
    )
    return (
        isinstance(record.get("text"), str | None)
        and isinstance(record.get("doc"), str | None)
        and isinstance(record.get("title"), str | None)
        and good_span
    )


def _read_deleted(file: Path, rows: int) -> np.ndarray:
    deleted = _load_npy(file, mmap=False)
    if not isinstance(deleted, np.ndarray) or deleted.ndim != 1 or deleted.dtype.kind not in "iu":
        raise IndexFormatError(
            f"{file}: expected a list of deleted row numbers (int64), got {_shown(deleted)}; the index is damaged"
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


def _stat_key(st: os.stat_result) -> tuple:
    return st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns, st.st_size


# -- the manifest ------------------------------------------------------------------------------------------
def _write_manifest(path: Path, manifest: dict) -> None:
    with atomic_file(path / MANIFEST, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1)


def _manifest_object(file: Path, raw: bytes) -> dict:
    """The JSON object in ``raw``, of this format and version, with the keys every manifest has."""
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
    return manifest


def _checker(file: Path) -> Callable[[bool, str, str, Any], None]:
    """``check(ok, key, expected, value)``: raise IndexFormatError naming ``file`` and ``key`` unless ``ok``."""

    def check(ok: bool, key: str, expected: str, value: Any) -> None:
        if not ok:
            shown = json.dumps(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise IndexFormatError(f"{file}: {key!r} must be {expected}, got {shown}; the index is damaged")

    return check


def _check_metadata(manifest: dict, check: Callable[[bool, str, str, Any], None]) -> None:
    """The manifest's keys about the whole index: model, dim, metric, model_path, backend, deleted."""
    check(isinstance(manifest["model"], str) and bool(manifest["model"]), "model", "a model name", manifest["model"])
    check(_positive_int(manifest["dim"]), "dim", "a positive integer", manifest["dim"])
    check(manifest["metric"] in METRICS, "metric", " or ".join(METRICS), manifest["metric"])
    for key in ("model_path", "backend"):
        value = manifest.get(key)
        check(value is None or isinstance(value, str), key, "a string or null", value)
    deleted = manifest.get("deleted")
    check(deleted is None or _file_name(deleted), "deleted", "null or a file name in the index folder", deleted)


def _check_documents(manifest: dict, check: Callable[[bool, str, str, Any], None]) -> None:
    """The optional keys of an index of documents ("documents": how they were split) and of lexical search."""
    documents = manifest.get("documents")
    if documents is not None:
        check(isinstance(documents, dict), "documents", "an object", documents)
        check(_positive_int(documents.get("window")), "documents.window", "a positive integer", documents.get("window"))
        overlap = documents.get("overlap")
        check(type(overlap) is int and overlap >= 0, "documents.overlap", "a count of tokens", overlap)
        check(documents.get("mode") in DOCUMENT_MODES, "documents.mode", " or ".join(DOCUMENT_MODES), documents)
    lexical = manifest.get("lexical")
    if lexical is not None:
        check(isinstance(lexical, dict), "lexical", "an object", lexical)
        check(_file_name(lexical.get("file")), "lexical.file", "a file name in the index folder", lexical)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _file_name(value: Any) -> bool:
    """A plain file name: no folder part, so a manifest can only name files inside its own folder."""
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\\" not in value


# -- the lock (sbert.locks) -------------------------------------------------------------------------------
def _locked_error(file: Path, holder: str, timeout: float) -> IndexLockedError:
    return IndexLockedError(
        f"{file.parent}: another writer ({holder}) still holds the lock {file} after {timeout:g} s; "
        "try again when it has finished, or wait longer (lock_timeout=, --lock-timeout)"
    )
