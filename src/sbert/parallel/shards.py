"""A folder of embedding shards: ``shard-NNNNNN.npy`` (float32 vectors) and ``shard-NNNNNN.parquet`` (id, text,
embedding) per chunk of the input, described by ``manifest.json``.

The manifest records how the vectors were made (model, backend, precision, dimension, shard size, ...) and each
finished shard: its first row, row count, file names, the sha256 of its ``.npy`` file and of its texts. Shard files
are written atomically by whichever process encodes them; only one process (the coordinator) writes the manifest,
so a shard counts as finished once it is recorded there. Readers give the vectors back in input order.
"""

from __future__ import annotations

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

MANIFEST = "manifest.json"
FORMAT = "sbert-shards"
_SHARD_FILE = re.compile(r"^shard-\d{6,}\.(npy|parquet)$")


class ShardFolderError(SbertError, ValueError):
    """A shard folder that cannot be written or read as asked (names the folder and what is wrong)."""


def shard_name(index: int) -> str:
    return f"shard-{index:06d}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_shard_files(folder: Path, index: int, start: int, texts: list[str], vectors: np.ndarray) -> dict[str, Any]:
    """Write shard ``index`` (rows ``start`` ..) atomically: vectors (n, dim) float32 to ``.npy``, and
    id/text/embedding to ``.parquet``. Returns its manifest record (without the texts' digest)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    buffer = io.BytesIO()
    np.save(buffer, vectors)
    name = shard_name(index)
    with atomic_file(folder / f"{name}.npy", "wb") as handle:
        handle.write(buffer.getvalue())
    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    table = pa.table(
        {
            "id": pa.array(np.arange(start, start + len(texts), dtype=np.int64)),
            "text": pa.array(texts, type=pa.string()),
            "embedding": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
        }
    )
    with atomic_file(folder / f"{name}.parquet", "wb") as handle:
        pq.write_table(table, handle)
    return {
        "start": start,
        "rows": len(texts),
        "dim": int(vectors.shape[1]),
        "vectors": f"{name}.npy",
        "table": f"{name}.parquet",
        "sha256": _sha256(buffer.getvalue()),
    }


class ShardFolder:
    """The manifest of a shard folder, as the coordinating process reads and updates it."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path, self.manifest = path, manifest

    @property
    def shards(self) -> dict[str, dict[str, Any]]:
        return self.manifest["shards"]

    @classmethod
    def read(cls, path: str | Path) -> ShardFolder:
        """Open an existing shard folder for reading; ``ShardFolderError`` if it is not one."""
        path = Path(path)
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise ShardFolderError(f"{path}: no {MANIFEST}; expected a folder written by sbert encode --processes")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ShardFolderError(f"{manifest_path}: not readable JSON ({err})") from err
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ShardFolderError(f"{manifest_path}: not an sbert shard manifest (expected format {FORMAT!r})")
        return cls(path, manifest)

    @classmethod
    def open(cls, path: str | Path, settings: dict[str, Any], resume: bool) -> ShardFolder:
        """Create ``path`` or reopen it: with ``resume``, finished shards made with the same ``settings`` are
        kept; without, earlier shards and manifest are removed. A folder of other files is refused."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise ShardFolderError(f"{path}: exists and is not a folder; --out with --processes names a folder")
        if path.is_dir() and not (path / MANIFEST).exists():
            others = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
            if others:
                raise ShardFolderError(
                    f"{path}: a folder that holds other files ({', '.join(others[:3])}"
                    f"{', ...' if len(others) > 3 else ''}) and no {MANIFEST}; choose a new or empty folder"
                )
        if (path / MANIFEST).exists():
            folder = cls.read(path)
            if resume:
                folder._check_settings(settings)
                return folder
            folder._clear()
        path.mkdir(parents=True, exist_ok=True)
        folder = cls(path, {"format": FORMAT, "version": 1, "settings": settings, "shards": {}, "complete": False})
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

    def _clear(self) -> None:
        for entry in self.path.iterdir():
            if _SHARD_FILE.match(entry.name) or entry.name == MANIFEST:
                entry.unlink()

    def save(self) -> None:
        with atomic_file(self.path / MANIFEST, "w", encoding="utf-8") as handle:
            json.dump(self.manifest, handle, indent=1)

    def is_done(self, index: int, digest: str) -> bool:
        """True if shard ``index`` is recorded with intact files; its texts must be the ones given now."""
        record = self.shards.get(str(index))
        if record is None:
            return False
        if record["texts_sha256"] != digest:
            raise ShardFolderError(
                f"{self.path}: shard {index} (rows {record['start']}..{record['start'] + record['rows'] - 1}) was "
                "made from other texts than the input now has; the input changed since: start over (--no-resume)"
            )
        vectors, table = self.path / record["vectors"], self.path / record["table"]
        return table.is_file() and vectors.is_file() and _sha256(vectors.read_bytes()) == record["sha256"]

    def record(self, index: int, record: dict[str, Any], digest: str) -> None:
        """Record a finished shard (and the dimension, checked against earlier shards); saves the manifest."""
        settings = self.manifest["settings"]
        if settings.get("dim") not in (None, record["dim"]):
            raise ShardFolderError(f"{self.path}: shard {index} has dimension {record['dim']}, not {settings['dim']}")
        settings["dim"] = record["dim"]
        self.shards[str(index)] = {**record, "texts_sha256": digest}
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


def iter_vectors(path: str | Path, verify: bool = True) -> Iterator[np.ndarray]:
    """The vectors of a complete shard folder, one (rows, dim) float32 array per shard, in input order.
    ``verify`` checks each file against its sha256 in the manifest."""
    folder = ShardFolder.read(path)
    for record in folder.ordered():
        file = folder.path / record["vectors"]
        if not file.is_file():
            raise ShardFolderError(f"{file}: missing; resume the run to redo shard {record['vectors']}")
        data = file.read_bytes()
        if verify and _sha256(data) != record["sha256"]:
            raise ShardFolderError(f"{file}: its checksum differs from {MANIFEST}'s; the file is damaged")
        yield np.load(io.BytesIO(data))


def load_vectors(path: str | Path, verify: bool = True) -> np.ndarray:
    """All vectors of a complete shard folder as one (n, dim) float32 array, in input order."""
    parts = list(iter_vectors(path, verify))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def load_table(path: str | Path):
    """The Parquet shards of a complete folder as one ``pyarrow.Table`` (id, text, embedding), in input order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = ShardFolder.read(path)
    return pa.concat_tables([pq.read_table(folder.path / record["table"]) for record in folder.ordered()])
