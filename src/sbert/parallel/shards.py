"""A folder of embedding shards: ``shard-NNNNNN.npy`` (float32 vectors) and ``shard-NNNNNN.parquet`` (id, text,
embedding) per chunk of the input, described by ``manifest.json``.

The manifest records how the vectors were made (model, backend, precision, dimension, shard size, ...), the
input's fingerprint (a file's path, size and sha256) and each finished shard: its first row, row count, file
names (always its own ``shard-NNNNNN.*``, inside the folder), the sha256 of both its files and of its texts.
Shard files are written atomically by whichever process encodes them; only one process (the coordinator, which
holds the folder's lock ``.lock`` for the whole run) writes the manifest, so a shard counts as finished once it
is recorded there. Readers give the vectors back in input order and check every file against its checksum.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sbert.atomic import atomic_file
from sbert.errors import SbertError
from sbert.locks import check_lock_file, hold_lock
from sbert.parallel.inputs import texts_digest

MANIFEST = "manifest.json"
LOCK = ".lock"
FORMAT = "sbert-shards"
VERSION = 2  # 2: "input" fingerprint and each shard's "table_sha256" (version 1 folders still load)
_SHARD_FILE = re.compile(r"^shard-\d{6,}\.(npy|parquet)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ShardFolderError(SbertError, ValueError):
    """A shard folder that cannot be written or read as asked (names the folder and what is wrong)."""


class ShardFolderLockedError(ShardFolderError):
    """Another run is writing into the shard folder (it holds the folder's lock)."""


def shard_name(index: int) -> str:
    return f"shard-{index:06d}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_shard_files(
    folder: Path, index: int, start: int, texts: list[str], vectors: np.ndarray, ids: list[str] | None = None
) -> dict[str, Any]:
    """Write shard ``index`` (rows ``start`` ..) atomically: vectors (n, dim) float32 to ``.npy``, and
    id/text/embedding to ``.parquet`` (and ``corpus_id``, each row's id in the corpus, where ``ids`` are
    given). Returns its manifest record (without the texts' digest)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    buffer, parquet = io.BytesIO(), io.BytesIO()
    np.save(buffer, vectors)
    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    table = pa.table(
        {
            "id": pa.array(np.arange(start, start + len(texts), dtype=np.int64)),
            "text": pa.array(texts, type=pa.string()),
            "embedding": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
        }
        | ({"corpus_id": pa.array(ids, type=pa.string())} if ids is not None else {})
    )
    pq.write_table(table, parquet)
    name = shard_name(index)
    for suffix, data in ((".npy", buffer), (".parquet", parquet)):
        with atomic_file(folder / f"{name}{suffix}", "wb") as handle:
            handle.write(data.getvalue())
    return {
        "start": start,
        "rows": len(texts),
        "dim": int(vectors.shape[1]),
        "vectors": f"{name}.npy",
        "table": f"{name}.parquet",
        "sha256": _sha256(buffer.getvalue()),
        "table_sha256": _sha256(parquet.getvalue()),
    }


def read_shard_file(folder: Path, name: str) -> bytes:
    """The bytes of the shard file ``name`` in ``folder``: a plain file, never a link (names were checked on
    reading the manifest: ``shard-NNNNNN.npy`` or ``.parquet``, nothing outside the folder)."""
    file = folder / name
    if file.is_symlink():
        raise ShardFolderError(f"{file}: is a link; shard files must be plain files inside the folder")
    try:
        return file.read_bytes()
    except FileNotFoundError:
        raise ShardFolderError(f"{file}: missing; resume the run to redo this shard") from None
    except OSError as err:
        raise ShardFolderError(f"{file}: cannot be read ({err}); resume the run to redo this shard") from err


def read_shard_table(file: Path, data: bytes, record: dict[str, Any]) -> Any:
    """The ``pyarrow.Table`` in a shard's Parquet bytes; ``ShardFolderError`` (naming ``file``) if they are not
    Parquet or do not hold the shard's rows (ids ``start`` ..)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
        ids = table.column("id").to_numpy()
    except (pa.ArrowException, OSError, KeyError, ValueError) as err:
        raise ShardFolderError(f"{file}: not a readable shard table ({err}); resume the run to redo it") from err
    expected = np.arange(record["start"], record["start"] + record["rows"])
    if len(ids) != len(expected) or not np.array_equal(ids, expected):
        raise ShardFolderError(
            f"{file}: holds {len(ids)} rows, not ids {record['start']}..{record['start'] + record['rows'] - 1} as "
            f"{MANIFEST} records; resume the run to redo it"
        )
    return table


def _intact(folder: Path, name: str, sha256: str) -> bool:
    try:
        return _sha256(read_shard_file(folder, name)) == sha256
    except ShardFolderError:
        return False


class ShardFolder:
    """The manifest of a shard folder, as the coordinating process reads and updates it.

    Opened for writing (``open``) it holds the folder's lock until ``close`` (or the end of a ``with`` block,
    or this process): a second writer is refused with ``ShardFolderLockedError``."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path, self.manifest = path, manifest
        self._lock = contextlib.ExitStack()

    @property
    def shards(self) -> dict[str, dict[str, Any]]:
        return self.manifest["shards"]

    def close(self) -> None:
        """Let go of the folder's lock (if this object holds it)."""
        self._lock.close()

    def __enter__(self) -> ShardFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def read(cls, path: str | Path) -> ShardFolder:
        """Open an existing shard folder for reading; ``ShardFolderError`` if it is not one."""
        path = Path(path)
        manifest_path = path / MANIFEST
        if manifest_path.is_symlink():
            raise ShardFolderError(f"{manifest_path}: is a link; a shard folder's files must be plain files inside it")
        if not manifest_path.is_file():
            raise ShardFolderError(f"{path}: no {MANIFEST}; expected a folder written by sbert encode --processes")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ShardFolderError(f"{manifest_path}: not readable JSON ({err})") from err
        _check_manifest(manifest_path, manifest)
        return cls(path, manifest)

    @classmethod
    def open(
        cls, path: str | Path, settings: dict[str, Any], resume: bool, source: dict[str, Any] | None = None
    ) -> ShardFolder:
        """Create ``path`` or reopen it, and take its lock (``ShardFolderLockedError`` if another run holds it):
        with ``resume``, finished shards made with the same ``settings`` from the same input (``source``, the
        fingerprint of ``inputs.input_fingerprint``; None: not known) are kept; without, earlier shards and
        manifest are removed. A folder of other files is refused."""
        path = Path(path)
        _check_writable(path)
        path.mkdir(parents=True, exist_ok=True)
        lock = contextlib.ExitStack()
        lock.enter_context(hold_lock(path / LOCK, 0, lambda holder: _busy(path, holder), unsafe=ShardFolderError))
        try:
            folder = cls._start(path, settings, resume, source)
        except BaseException:
            lock.close()
            raise
        folder._lock = lock
        return folder

    @classmethod
    def _start(cls, path: Path, settings: dict[str, Any], resume: bool, source: dict[str, Any] | None) -> ShardFolder:
        if (path / MANIFEST).exists() and resume:
            folder = cls.read(path)
            folder._check_source(source)
            folder._check_settings(settings)
            if source is not None:
                folder.manifest["input"] = source
                folder.save()
            return folder
        if (path / MANIFEST).exists():
            _clear(path)
        manifest = {"format": FORMAT, "version": VERSION, "settings": settings, "input": source}
        folder = cls(path, {**manifest, "shards": {}, "complete": False})
        folder.save()
        return folder

    def _check_settings(self, settings: dict[str, Any]) -> None:
        old = self.manifest.get("settings", {})
        changed = [k for k in settings if k != "dim" and old.get(k) != settings[k]]
        if changed:
            detail = "; ".join(f"{k}: {old.get(k)!r} there, {settings[k]!r} now" for k in changed)
            raise ShardFolderError(
                f"{self.path}: its shards were made with other settings ({detail}); resume with the same "
                "settings, or start over (--no-resume / resume=False) or in a new folder"
            )

    def _check_source(self, source: dict[str, Any] | None) -> None:
        """Refuse to resume from an input whose fingerprint differs from the recorded one (where both are known)."""
        old = self.manifest.get("input")
        if not (source and isinstance(old, dict) and old.get("sha256")) or old["sha256"] == source["sha256"]:
            return
        raise ShardFolderError(
            f"{self.path}: its shards were made from another input: {old.get('path')} ({old.get('bytes')} bytes, "
            f"sha256 {old['sha256']}) there, {source['path']} ({source['bytes']} bytes, sha256 {source['sha256']}) "
            "now; resume with the same input, or start over (--no-resume / resume=False) or in a new folder"
        )

    def save(self) -> None:
        with atomic_file(self.path / MANIFEST, "w", encoding="utf-8") as handle:
            json.dump(self.manifest, handle, indent=1)

    def is_done(self, index: int, digest: str) -> bool:
        """True if shard ``index`` is recorded with intact files (both match their checksums); its texts must be
        the ones given now (``digest``), else ``ShardFolderError``."""
        record = self.shards.get(str(index))
        if record is None:
            return False
        if record["texts_sha256"] != digest:
            raise ShardFolderError(
                f"{self.path}: shard {index} (rows {record['start']}..{record['start'] + record['rows'] - 1}) was "
                "made from other texts than the input now has; the input changed since: start over (--no-resume)"
            )
        if not _intact(self.path, record["vectors"], record["sha256"]):
            return False
        if "table_sha256" in record:
            return _intact(self.path, record["table"], record["table_sha256"])
        return self._legacy_table_ok(record)

    def _legacy_table_ok(self, record: dict[str, Any]) -> bool:
        """A shard recorded before Parquet checksums: its table must read and hold the recorded texts; if it
        does, its checksum is recorded now (saved with the manifest's next change)."""
        try:
            data = read_shard_file(self.path, record["table"])
            table = read_shard_table(self.path / record["table"], data, record)
        except ShardFolderError:
            return False
        if texts_digest(table.column("text").to_pylist()) != record["texts_sha256"]:
            return False
        record["table_sha256"] = _sha256(data)
        return True

    def record(self, index: int, record: dict[str, Any], digest: str) -> None:
        """Record a finished shard (and the dimension, checked against earlier shards); saves the manifest.
        The folder counts as unfinished until ``finish``."""
        settings = self.manifest["settings"]
        if settings.get("dim") not in (None, record["dim"]):
            raise ShardFolderError(f"{self.path}: shard {index} has dimension {record['dim']}, not {settings['dim']}")
        settings["dim"] = record["dim"]
        self.shards[str(index)] = {**record, "texts_sha256": digest}
        self.manifest["complete"] = False
        self.save()

    def finish(self, rows: int, count: int) -> None:
        """Mark the folder complete: ``count`` shards holding ``rows`` vectors."""
        stale = sorted(int(k) for k in self.shards if int(k) >= count)
        if stale:
            raise ShardFolderError(
                f"{self.path}: holds shard {stale[0]} but the input now ends at shard {count - 1}; "
                "the input changed since: start over (--no-resume)"
            )
        self.manifest.update(complete=True, rows=rows, count=count)
        self.save()

    def ordered(self) -> list[dict[str, Any]]:
        """The records of a complete folder, in input order; ``ShardFolderError`` if any is missing."""
        if not self.manifest.get("complete"):
            raise ShardFolderError(f"{self.path}: the run that writes it has not finished; resume it first")
        missing = [i for i in range(self.manifest["count"]) if str(i) not in self.shards]
        if missing:
            raise ShardFolderError(f"{self.path}: {MANIFEST} lacks shard {missing[0]}; resume the run to redo it")
        return [self.shards[str(i)] for i in range(self.manifest["count"])]


def _busy(path: Path, holder: str) -> ShardFolderLockedError:
    return ShardFolderLockedError(
        f"{path}: another run ({holder}) is writing into this folder (it holds the lock {path / LOCK}); "
        "wait for it to finish or stop it, or write into another folder"
    )


def _check_writable(path: Path) -> None:
    """Refuse a file, a folder whose lock is not a plain file, or a folder that holds other files (hidden ones
    too) and no manifest (never written into)."""
    if path.exists() and not path.is_dir():
        raise ShardFolderError(f"{path}: exists and is not a folder; --out with --processes names a folder")
    if not path.is_dir():
        return
    check_lock_file(path / LOCK, ShardFolderError)
    if not (path / MANIFEST).exists():
        others = sorted(p.name for p in path.iterdir() if p.name != LOCK)
        if others:
            raise ShardFolderError(
                f"{path}: a folder that holds other files ({', '.join(others[:3])}"
                f"{', ...' if len(others) > 3 else ''}) and no {MANIFEST}; choose a new or empty folder"
            )


def _clear(path: Path) -> None:
    """Remove the shard files and manifest of ``path`` (starting over), after checking that its manifest is a
    shard folder's (its shard records may be damaged: starting over is how to get past them)."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ShardFolderError(f"{path / MANIFEST}: not readable JSON ({err}); not removing anything") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ShardFolderError(f"{path / MANIFEST}: not an sbert shard manifest; not removing anything")
    for entry in path.iterdir():
        if _SHARD_FILE.match(entry.name) or entry.name == MANIFEST:
            entry.unlink()


def _check_manifest(file: Path, manifest: Any) -> None:
    """Refuse a manifest that is not a shard folder's, or whose records are malformed or name other files."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ShardFolderError(f"{file}: not an sbert shard manifest (expected format {FORMAT!r})")
    if not isinstance(manifest.get("settings"), dict) or not isinstance(manifest.get("shards"), dict):
        raise ShardFolderError(f"{file}: lacks its 'settings' or 'shards' object; the manifest is damaged")
    if manifest.get("complete") and not all(_count(manifest.get(k)) for k in ("rows", "count")):
        raise ShardFolderError(f"{file}: is marked complete without whole-number 'rows' and 'count'")
    for key, record in manifest["shards"].items():
        problem = _record_problem(key, record)
        if problem:
            raise ShardFolderError(f"{file}: shard {key!r} {problem}; the manifest is damaged or was edited")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _record_problem(key: str, record: Any) -> str | None:
    """What is wrong with one shard record (None if nothing): numbers, checksums, and its files' names, which
    must be the shard's own (``shard-NNNNNN.npy``/``.parquet``), so that no path leads out of the folder."""
    if not re.fullmatch(r"[0-9]+", key) or not isinstance(record, dict):
        return "is not a shard number with its record"
    if not all(_count(record.get(k)) for k in ("start", "rows", "dim")):
        return "lacks whole-number 'start', 'rows' and 'dim'"
    for field, suffix in (("vectors", ".npy"), ("table", ".parquet")):
        expected = shard_name(int(key)) + suffix
        if record.get(field) != expected:
            return f"names {record.get(field)!r} as its {field!r} file; expected {expected!r}, inside the folder"
    sums = ("sha256", "texts_sha256", *(("table_sha256",) if "table_sha256" in record else ()))
    bad = [k for k in sums if not (isinstance(record.get(k), str) and _SHA256.match(record[k]))]
    return f"has no valid {bad[0]!r} (a sha256 in hex)" if bad else None


def iter_vectors(path: str | Path, verify: bool = True) -> Iterator[np.ndarray]:
    """The vectors of a complete shard folder, one (rows, dim) float32 array per shard, in input order.
    ``verify`` checks each file against its sha256 in the manifest."""
    folder = ShardFolder.read(path)
    for record in folder.ordered():
        file = folder.path / record["vectors"]
        data = read_shard_file(folder.path, record["vectors"])
        if verify and _sha256(data) != record["sha256"]:
            raise ShardFolderError(f"{file}: its checksum differs from {MANIFEST}'s; the file is damaged")
        try:
            vectors = np.load(io.BytesIO(data), allow_pickle=False)
        except (OSError, ValueError, EOFError) as err:
            raise ShardFolderError(f"{file}: not a readable .npy file ({err}); the file is damaged") from err
        if vectors.shape != (record["rows"], record["dim"]):
            raise ShardFolderError(
                f"{file}: holds an array of shape {vectors.shape}, not ({record['rows']}, {record['dim']})"
            )
        yield vectors


def load_vectors(path: str | Path, verify: bool = True) -> np.ndarray:
    """All vectors of a complete shard folder as one (n, dim) float32 array, in input order."""
    parts = list(iter_vectors(path, verify))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def load_table(path: str | Path, verify: bool = True) -> Any:
    """The Parquet shards of a complete folder as one ``pyarrow.Table`` (id, text, embedding), in input order.
    ``verify`` checks each file against its sha256 in the manifest (folders written before Parquet checksums
    are read without); a damaged file is named in a ``ShardFolderError``."""
    import pyarrow as pa

    folder = ShardFolder.read(path)
    tables = []
    for record in folder.ordered():
        file = folder.path / record["table"]
        data = read_shard_file(folder.path, record["table"])
        if verify and "table_sha256" in record and _sha256(data) != record["table_sha256"]:
            raise ShardFolderError(f"{file}: its checksum differs from {MANIFEST}'s; the file is damaged")
        tables.append(read_shard_table(file, data, record))
    return pa.concat_tables(tables)
