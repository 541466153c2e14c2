"""A persistent vector index: embeddings, ids and texts on disk, searched exactly or approximately.

An index folder holds::

    manifest.json            model, dimension, metric, and the files below that make up the index
    seg-<tag>.npy            float32 vectors (unit length for cosine), one file per build or add
    seg-<tag>.jsonl          one {"id": ..., "text": ...} line per row of the matching .npy
    deleted-<tag>.npy        deleted row numbers (int64), when any
    <structure>-<tag>.faiss  search structures: hnsw (approximate), int8, binary (quantised)

Files are never changed once written. A write makes new files, atomically replaces manifest.json,
then removes files the manifest no longer names; a crash at any point leaves the previous manifest
and every file it names intact, so the index stays readable. One writer at a time (a lock file).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sbert.atomic import atomic_file
from sbert.errors import IndexExistsError, IndexFormatError, IndexMismatchError
from sbert.search.exact import TopK, as_tensor, semantic_search
from sbert.similarity import Array

FORMAT = "sbert-vector-index"
VERSION = 1
MANIFEST = "manifest.json"
STRUCTURES = ("hnsw", "int8", "binary")
METRICS = ("cosine", "dot")
DEFAULT_RESCORE = {"int8": 4, "binary": 10}
COMPACT_AT = 0.25  # share of deleted rows that triggers a rewrite without them


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


class VectorIndex:
    """Vectors with ids and texts in a folder. ``build`` makes one, ``open`` reads one, then
    ``add``/``delete``/``search``. Searching is exact unless an ``hnsw``, ``int8`` or ``binary``
    structure was built (``ann=True``, ``quantization=``) or asked for (``method=``)."""

    def __init__(self, path: Path, manifest: dict) -> None:
        self.path, self.manifest = path, manifest
        self._load()

    # -- reading ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> VectorIndex:
        """Open an index folder; IndexFormatError names what is missing or malformed."""
        path = Path(path)
        if not path.is_dir():
            raise IndexFormatError(f"{path}: no such index folder")
        return cls(path, _read_manifest(path))

    @property
    def model(self) -> str:
        return self.manifest["model"]

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

    def _file(self, name: str) -> Path:
        file = self.path / name
        if not file.is_file():
            raise IndexFormatError(f"{file}: missing (named in {self.path / MANIFEST}); the index is damaged")
        return file

    def _load(self) -> None:
        self.ids: list[str] = []
        self.texts: list[str | None] = []
        parts = []
        for seg in self.manifest["segments"]:
            vectors = np.load(self._file(seg["vectors"]), mmap_mode="r")
            if vectors.ndim != 2 or vectors.shape != (seg["rows"], self.dim) or vectors.dtype != np.float32:
                raise IndexFormatError(
                    f"{self.path / seg['vectors']}: expected float32 ({seg['rows']}, {self.dim}), "
                    f"got {vectors.dtype} {vectors.shape}"
                )
            parts.append(vectors)
            self._read_records(self._file(seg["records"]), seg["rows"])
        self.vectors: np.ndarray = (
            parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)
        )
        deleted = self.manifest.get("deleted")
        self.deleted = np.load(self._file(deleted)) if deleted else np.zeros(0, np.int64)
        self.row_of = {id_: row for row, id_ in enumerate(self.ids)}
        for row in self.deleted.tolist():
            self.row_of.pop(self.ids[row], None)
        self._alive: np.ndarray | None = None
        self._structures: dict = {}
        self._progress: bool | None = None

    def _read_records(self, file: Path, rows: int) -> None:
        before = len(self.ids)
        with open(file, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    record = json.loads(line)
                    self.ids.append(str(record["id"]))
                    self.texts.append(record.get("text"))
                except (json.JSONDecodeError, KeyError, TypeError) as err:
                    raise IndexFormatError(f"{file}, line {number}: expected a JSON object with an 'id'") from err
        if len(self.ids) - before != rows:
            raise IndexFormatError(f"{file}: {len(self.ids) - before} records for {rows} vectors")

    def _structure(self, name: str):
        if name not in self._structures:
            entry = self.manifest["structures"].get(name)
            if entry is None:
                raise ValueError(f"index {self.path} has no {name!r} structure; it has: {self.structures or 'none'}")
            faiss = _faiss()
            try:
                self._structures[name] = (
                    faiss.read_index_binary(str(self._file(entry["file"])))
                    if name == "binary"
                    else faiss.read_index(str(self._file(entry["file"])))
                )
            except RuntimeError as err:
                raise IndexFormatError(f"{self.path / entry['file']}: unreadable {name} structure: {err}") from err
            if self._structures[name].ntotal != len(self.ids):
                raise IndexFormatError(f"{self.path / entry['file']}: holds a different number of rows than the index")
        return self._structures[name]

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

    def _prepare(self, embeddings: Array) -> np.ndarray:
        x = as_tensor(embeddings).float().cpu().numpy()
        if x.shape[1] != self.dim:
            raise IndexMismatchError(
                f"index {self.path} holds {self.dim}-dim vectors (model {self.model!r}); got {x.shape[1]}-dim"
            )
        if not np.isfinite(x).all():
            raise ValueError("embeddings contain NaN or infinite values")
        return _normalized(x) if self.metric == "cosine" else np.ascontiguousarray(x, dtype=np.float32)

    # -- searching -------------------------------------------------------------------------------------
    def default_method(self) -> str:
        """hnsw if built, else a quantised structure if built, else exact."""
        for name in STRUCTURES:
            if name in self.manifest["structures"]:
                return name
        return "exact"

    def search(
        self,
        queries: Array,
        k: int = 10,
        *,
        method: str | None = None,
        ef_search: int | None = None,
        rescore: int | None = None,
    ) -> list[list[Hit]]:
        """The best ``k`` live rows for each query embedding, best first (see ``search_rows``)."""
        found = self.search_rows(queries, k, method=method, ef_search=ef_search, rescore=rescore)
        return [
            [Hit(self.ids[r], float(s), self.texts[r], int(r)) for s, r in zip(srow, rrow, strict=True) if r >= 0]
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
    ) -> TopK:
        """Row numbers and scores of the best ``k`` live rows per query; rows -1 pad when fewer exist.

        ``method``: exact (float32, brute force), hnsw (approximate, ``ef_search`` candidates), int8 or
        binary (quantised scan, then the best ``k x rescore`` re-scored with the float32 vectors;
        ``rescore=1`` keeps the quantised order and scores).
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        q = self._prepare(queries)
        method = method or self.default_method()
        if method == "exact":
            return self._exact(q, k)
        if method not in STRUCTURES:
            raise ValueError(f"unknown search method {method!r}; expected exact, {', '.join(STRUCTURES)}")
        faiss = _faiss()
        index = self._structure(method)
        fetch = k if method == "hnsw" else k * (rescore or DEFAULT_RESCORE[method])
        fetch = max(1, min(fetch, len(self.ids)))
        params = faiss.SearchParametersHNSW() if method == "hnsw" else faiss.SearchParameters()
        if method == "hnsw":
            params.efSearch = max(ef_search or self.manifest["structures"]["hnsw"]["ef_search"], fetch)
        if len(self.deleted):
            params.sel = self._selector()
        with _faiss_threads(1 if len(q) < 16 else None):
            if method == "binary":
                dist, rows = index.search(_sign_bits(q), fetch, params=params)
                scores = -dist.astype(np.float32)  # fewer differing bits = more similar
            else:
                scores, rows = index.search(q, fetch, params=params)
        if method != "hnsw" and (rescore or DEFAULT_RESCORE[method]) > 1:
            scores = np.where(rows >= 0, np.einsum("qd,qkd->qk", q, self.vectors[np.maximum(rows, 0)]), -np.inf)
        return _pad(*_best(scores.astype(np.float32), rows.astype(np.int64), k), k)

    def _selector(self):
        faiss = _faiss()
        if self._alive is None:
            alive = np.ones(len(self.ids), dtype=bool)
            alive[self.deleted] = False
            self._alive = np.packbits(alive, bitorder="little")
        return faiss.IDSelectorBitmap(len(self.ids), faiss.swig_ptr(self._alive))

    def _exact(self, q: np.ndarray, k: int) -> TopK:
        if not len(self.deleted):
            return _pad(*semantic_search(q, self.vectors, k, score="dot"), k)
        found = semantic_search(q, self.vectors, min(k + len(self.deleted), len(self.ids)), score="dot")
        dead = np.isin(found.indices, self.deleted)
        return _pad(*_best(np.where(dead, -np.inf, found.scores), np.where(dead, -1, found.indices), k), k)

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
    ) -> VectorIndex:
        """Write a new index at ``path`` from (n, dim) embeddings made by ``model`` (a name or folder).

        ``ids`` default to "0", "1", ...; ``texts`` are stored when given. ``ann`` adds an HNSW graph
        (FAISS; ``hnsw_m`` links per node, ``ef_construction``, ``ef_search``); ``quantization`` adds an
        ``int8`` or ``binary`` scan structure. An existing index is replaced only with ``overwrite``.
        ``show_progress``: a bar while building structures (default: on a terminal, 100k rows or more).
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
        index = cls.__new__(cls)
        index.path, index.manifest = path, manifest
        index.ids, index.texts, index.vectors = [], [], np.zeros((0, x.shape[1]), np.float32)
        index.deleted, index.row_of, index._alive, index._structures = np.zeros(0, np.int64), {}, None, {}
        index._progress = show_progress
        with index._writing():
            index._write(index._prepare(x), ids, texts, rebuild=True)
        return index

    @staticmethod
    def check_target(path: str | Path, overwrite: bool = False) -> None:
        """Raise IndexExistsError if ``build`` could not write to ``path`` (call it before costly encoding)."""
        path = Path(path)
        if (path / MANIFEST).exists() and not overwrite:
            raise IndexExistsError(
                f"{path}: an index is already there; pass overwrite=True (--overwrite) to replace it"
            )
        if path.exists() and not path.is_dir():
            raise IndexExistsError(f"{path}: exists and is not a folder")

    def add(
        self,
        embeddings: Array,
        ids: Sequence[str] | None = None,
        texts: Sequence[str] | None = None,
        show_progress: bool | None = None,
    ) -> None:
        """Append rows (ids default to consecutive numbers after the largest numeric id)."""
        self._progress = show_progress
        with self._writing():
            self._write(self._prepare(embeddings), ids, texts, rebuild=False)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete rows by id; returns how many. Unknown ids raise KeyError naming them. Rewrites the index
        without deleted rows once they pass a quarter of it."""
        ids = [str(i) for i in ids]
        missing = [i for i in ids if i not in self.row_of]
        if missing:
            more = " ..." if len(missing) > 5 else ""
            raise KeyError(f"index {self.path} has no live rows with ids {missing[:5]}{more}")
        rows = np.unique([self.row_of[i] for i in ids]).astype(np.int64)
        with self._writing():
            deleted = np.union1d(self.deleted, rows).astype(np.int64)
            if len(deleted) > COMPACT_AT * len(self.ids):
                self._compact(deleted)
            else:
                name = f"deleted-{_tag()}.npy"
                with atomic_file(self.path / name) as handle:
                    np.save(handle, deleted)
                self._commit({**self.manifest, "deleted": name, "updated": _now()})
        return len(rows)

    def compact(self) -> None:
        """Rewrite the index as one segment without deleted rows, rebuilding its structures."""
        with self._writing():
            self._compact(self.deleted)

    def _compact(self, deleted: np.ndarray) -> None:
        keep = np.setdiff1d(np.arange(len(self.ids)), deleted)
        vectors = np.ascontiguousarray(self.vectors[keep])
        ids, texts = [self.ids[r] for r in keep], [self.texts[r] for r in keep]
        self.manifest = {**self.manifest, "segments": [], "deleted": None}
        self.ids, self.texts, self.vectors = [], [], np.zeros((0, self.dim), np.float32)
        self.deleted, self.row_of, self._alive, self._structures = np.zeros(0, np.int64), {}, None, {}
        self._write(vectors, ids, texts, rebuild=True)

    def _write(self, x: np.ndarray, ids: Sequence[str] | None, texts: Sequence[str] | None, rebuild: bool) -> None:
        n = len(x)
        ids = self._new_ids(n) if ids is None else [str(i) for i in ids]
        if len(ids) != n or (texts is not None and len(texts) != n):
            raise ValueError(f"{n} embeddings but {len(ids)} ids and {len(texts) if texts else 0} texts")
        clash = [i for i in dict.fromkeys(ids) if i in self.row_of]
        if clash or len(set(ids)) != n:
            dupes = clash or [i for i in dict.fromkeys(ids) if ids.count(i) > 1]
            raise ValueError(f"ids must be unique in the index; repeated: {dupes[:5]}")
        tag = _tag()
        seg = {"vectors": f"seg-{tag}.npy", "records": f"seg-{tag}.jsonl", "rows": n}
        with atomic_file(self.path / seg["vectors"]) as handle:
            np.save(handle, x)
        with atomic_file(self.path / seg["records"], "w", encoding="utf-8") as handle:
            for i, id_ in enumerate(ids):
                record = {"id": id_} if texts is None else {"id": id_, "text": texts[i]}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        vectors = (x if not len(self.vectors) else np.concatenate([self.vectors, x])) if rebuild else None
        structures = {}
        for name, entry in self.manifest["structures"].items():
            index = self._make(name, entry, vectors) if rebuild else self._grow(name, x)
            structures[name] = {**entry, "file": f"{name}-{tag}.faiss"}
            self._save_structure(index, name, self.path / structures[name]["file"])
        segments = [*self.manifest["segments"], seg]
        self._commit({**self.manifest, "segments": segments, "structures": structures, "updated": _now()})

    def _make(self, name: str, entry: dict, vectors: np.ndarray):
        faiss = _faiss()
        if name == "hnsw":
            index = faiss.IndexHNSWFlat(self.dim, entry["M"], faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = entry["ef_construction"]
        elif name == "int8":
            index = faiss.IndexScalarQuantizer(self.dim, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)  # per-dimension ranges from the vectors at build time
        else:
            index = faiss.IndexBinaryFlat(self.dim)
        return self._add_to(index, name, vectors)

    def _grow(self, name: str, x: np.ndarray):
        """The structure with ``x`` added in place (a failed write reloads it from disk)."""
        return self._add_to(self._structure(name), name, x)

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

    def _new_ids(self, n: int) -> list[str]:
        numeric = [int(i) for i in self.ids if i.isdigit()]
        start = max(numeric) + 1 if numeric else 0
        return [str(start + i) for i in range(n)]

    def _commit(self, manifest: dict) -> None:
        _write_manifest(self.path, manifest)
        self.manifest = manifest
        self._load()
        self._collect_garbage()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the folder's write lock; on failure, reload what is on disk (the last committed state)."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as err:
                raise IndexFormatError(f"{self.path}: another process is writing this index") from err
            try:
                yield
            except BaseException:
                if (self.path / MANIFEST).is_file():
                    self.manifest = _read_manifest(self.path)
                    self._load()
                raise
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _collect_garbage(self) -> None:
        named = {MANIFEST, ".lock", *(s[k] for s in self.manifest["segments"] for k in ("vectors", "records"))}
        named |= {e["file"] for e in self.manifest["structures"].values()}
        if self.manifest.get("deleted"):
            named.add(self.manifest["deleted"])
        for file in self.path.iterdir():
            ours = file.name.startswith(("seg-", "deleted-", ".seg-", ".deleted-", f".{MANIFEST}.tmp-")) or any(
                file.name.lstrip(".").startswith(f"{s}-") for s in STRUCTURES
            )
            if file.is_file() and ours and file.name not in named:
                file.unlink(missing_ok=True)


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


def _write_manifest(path: Path, manifest: dict) -> None:
    with atomic_file(path / MANIFEST, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1)


def _read_manifest(path: Path) -> dict:
    file = path / MANIFEST
    if not file.is_file():
        raise IndexFormatError(f"{path}: not an sbert index ({MANIFEST} missing); build one with `sbert index build`")
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
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
