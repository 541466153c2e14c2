"""The persistent vector index: round trips, add/delete, atomic writes, model checks, ANN and quantised recall."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ranking import assert_top_k

from sbert.errors import IndexExistsError, IndexFormatError, IndexMismatchError
from sbert.search import semantic_search
from sbert.search.index import store as store_module
from sbert.search.index.folder import VectorIndex


def clustered(n: int, dim: int = 64, centres: int = 100, seed: int = 0) -> np.ndarray:
    """Vectors shaped like sentence embeddings: groups around shared directions, not uniform noise."""
    c = np.random.default_rng(1234).normal(size=(centres, dim))
    rng = np.random.default_rng(seed)
    return (c[rng.integers(0, centres, n)] + 0.8 * rng.normal(size=(n, dim))).astype(np.float32)


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a / np.linalg.norm(a, axis=1, keepdims=True)) @ (b / np.linalg.norm(b, axis=1, keepdims=True)).T


def recall(found: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, exact, strict=True)]))


@pytest.fixture
def vectors():
    return clustered(600, dim=32)


def test_build_open_round_trip_equals_semantic_search(tmp_path, vectors):
    texts = [f"text {i}" for i in range(600)]
    built = VectorIndex.build(tmp_path / "ix", vectors, model="default", texts=texts)
    opened = VectorIndex.open(tmp_path / "ix")
    assert (len(opened), opened.dim, opened.model, opened.metric) == (600, 32, "all-MiniLM-L6-v2", "cosine")
    queries = clustered(20, dim=32, seed=5)
    truth = cosine_matrix(queries, vectors)  # float32 paths agree with it up to rounding (see ranking)
    for ix in (built, opened):
        found = ix.search_rows(queries, 7)
        assert_top_k(found.scores, found.indices, truth, atol=1e-6)
    hit = opened.search(queries[:1], 1)[0][0]
    assert hit.score == pytest.approx(truth[0].max(), abs=1e-6) and hit.text == f"text {hit.row}"


def test_add_and_delete_persist(tmp_path, vectors):
    ix = VectorIndex.build(tmp_path / "ix", vectors[:400], model="default", ids=[f"a{i}" for i in range(400)])
    ix.add(vectors[400:500], texts=["x"] * 100)  # default ids continue after the largest number (none here)
    ix.add(vectors[500:], ids=[f"b{i}" for i in range(100)])
    assert ix.ids[400] == "0" and ix.ids[-1] == "b99" and len(ix) == 600
    with pytest.raises(ValueError, match="unique"):
        ix.add(vectors[:1], ids=["a3"])
    assert ix.delete(["a0", "b5", "7"]) == 3
    with pytest.raises(KeyError, match="a0"):
        ix.delete(["a0"])  # already deleted
    opened = VectorIndex.open(tmp_path / "ix")
    assert len(opened) == 597 and len(opened.manifest["segments"]) == 3
    found = opened.search_rows(vectors[[0, 505]], 5, method="exact").indices
    assert not np.isin(found, [0, 505, 407]).any()
    assert opened.search(vectors[[1]], 1)[0][0].id == "a1"


def test_deleting_a_quarter_compacts(tmp_path, vectors):
    ix = VectorIndex.build(tmp_path / "ix", vectors, model="default", quantization="int8")
    ix.delete([str(i) for i in range(0, 600, 3)])  # a third
    assert len(ix.manifest["segments"]) == 1 and ix.manifest["deleted"] is None and len(ix.ids) == 400
    assert ix.ids[:3] == ["1", "2", "4"]
    files = sorted(p.name.split("-")[0] for p in (tmp_path / "ix").iterdir())
    assert files == [".lock", "int8", "manifest.json", "seg", "seg"]  # old files collected
    keep = [i for i in range(600) if i % 3]  # row r of the compacted index is keep[r]
    found = ix.search_rows(vectors[:5], 5, method="exact")
    assert_top_k(found.scores, found.indices, cosine_matrix(vectors[:5], vectors[keep]), atol=1e-6)


def test_interrupted_writes_leave_the_previous_index_intact(tmp_path, vectors, monkeypatch):
    folder = tmp_path / "ix"
    VectorIndex.build(folder, vectors[:300], model="default", ann=True)
    before = VectorIndex.open(folder).search_rows(vectors[:10], 5)
    manifest = (folder / "manifest.json").read_text()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("simulated crash")

    # 1. after the new segment and graph are written, before the manifest is replaced
    ix = VectorIndex.open(folder)
    monkeypatch.setattr(store_module, "_write_manifest", crash)
    with pytest.raises(KeyboardInterrupt):
        ix.add(vectors[300:])
    assert len(ix) == 300  # the object went back to what is on disk
    monkeypatch.undo()
    # 2. halfway through writing the manifest itself
    real_dump = json.dump

    def half_dump(obj, handle, **kwargs):
        handle.write(json.dumps(obj)[:50])
        raise OSError("disk full")

    monkeypatch.setattr(store_module.json, "dump", half_dump)
    with pytest.raises(OSError):
        VectorIndex.open(folder).delete(["3"])
    monkeypatch.setattr(store_module.json, "dump", real_dump)
    assert (folder / "manifest.json").read_text() == manifest
    after = VectorIndex.open(folder)
    assert len(after) == 300
    np.testing.assert_array_equal(after.search_rows(vectors[:10], 5).indices, before.indices)
    # the next successful write collects the orphans of the failed ones
    after.add(vectors[300:])
    names = {p.name for p in folder.iterdir()}
    named = {s[k] for s in after.manifest["segments"] for k in ("vectors", "records")}
    assert names == named | {"manifest.json", ".lock", after.manifest["structures"]["hnsw"]["file"]}


def test_refuses_other_models_and_dimensions(tmp_path, vectors, model):
    ix = VectorIndex.build(tmp_path / "ix", vectors, model="default")
    with pytest.raises(IndexMismatchError, match="all-MiniLM-L6-v2"):
        ix.check_model(tmp_path)
    ix.check_model("all-MiniLM-L6-v2")
    ix.check_model(model.path)  # the same folder, named by path
    with pytest.raises(IndexMismatchError, match="32-dim"):
        ix.search(np.ones((1, 384), np.float32))
    with pytest.raises(IndexMismatchError, match="32-dim"):
        ix.add(np.ones((1, 16), np.float32))
    with pytest.raises(IndexMismatchError, match="384"):
        ix.check_model("default", 384)


def test_damaged_or_foreign_folders_give_clear_errors(tmp_path, vectors):
    with pytest.raises(IndexFormatError, match="no such index folder"):
        VectorIndex.open(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexFormatError, match=r"manifest\.json missing"):
        VectorIndex.open(tmp_path / "empty")
    folder = tmp_path / "ix"
    ix = VectorIndex.build(folder, vectors, model="default")
    with pytest.raises(IndexExistsError, match="overwrite"):
        VectorIndex.build(folder, vectors, model="default")
    (folder / ix.manifest["segments"][0]["vectors"]).unlink()
    with pytest.raises(IndexFormatError, match="missing"):
        VectorIndex.open(folder)
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(IndexFormatError, match="malformed JSON"):
        VectorIndex.open(folder)


@pytest.mark.slow
def test_hnsw_recall_at_10_on_20000_vectors(tmp_path):
    corpus, queries = clustered(20_000, dim=128, centres=400), clustered(200, dim=128, centres=400, seed=9)
    ix = VectorIndex.build(tmp_path / "ix", corpus, model="default", ann=True)
    exact = ix.search_rows(queries, 10, method="exact").indices
    assert ix.default_method() == "hnsw"
    assert recall(ix.search_rows(queries, 10).indices, exact) >= 0.95
    ix.delete([str(r) for r in exact[:, 0]])  # deleted rows never come back from the graph
    assert not np.isin(ix.search_rows(queries, 10).indices, exact[:, 0]).any()


def test_quantised_search_with_rescoring(tmp_path):
    corpus, queries = clustered(5000, dim=128), clustered(100, dim=128, seed=3)
    exact = semantic_search(queries, corpus, 10)
    for kind, floor in (("int8", 0.97), ("binary", 0.85)):
        ix = VectorIndex.build(tmp_path / kind, corpus, model="default", quantization=kind)
        found = ix.search_rows(queries, 10)
        assert recall(found.indices, exact.indices) >= floor, kind
        rescored = found.indices[:, 0] == exact.indices[:, 0]  # rescoring gives float scores for the same rows
        np.testing.assert_allclose(found.scores[rescored, 0], exact.scores[rescored, 0], atol=1e-5)
        raw = ix.search_rows(queries, 10, rescore=1)
        assert recall(raw.indices, exact.indices) <= recall(found.indices, exact.indices)


def test_backend_is_recorded_and_another_precision_refused(tmp_path, vectors, model):
    from sbert.search.index.folder import backend_name

    assert backend_name(model) == "torch/fp32"
    ix = VectorIndex.build(tmp_path / "ix", vectors[:500], model="default", backend="torch/fp32")
    assert VectorIndex.open(tmp_path / "ix").backend == "torch/fp32"
    with pytest.raises(IndexMismatchError, match=r"made with torch/fp32; these are made with onnx/int8.*allow_mixed"):
        ix.add(vectors[500:510], backend="onnx/int8")
    with pytest.raises(IndexMismatchError, match="torch/bf16"):
        ix.search(vectors[:1], backend="torch/bf16")
    ix.add(vectors[500:510], backend="onnx/fp32")  # fp32 vectors agree across backends
    assert ix.search(vectors[:1], 1, backend="onnx/fp32")[0][0].id == "0" and ix.backend == "torch/fp32"
    assert ix.search(vectors[:1], 1, backend="onnx/int8", allow_mixed_backend=True)[0][0].id == "0"
    ix.add(vectors[510:520], backend="onnx/int8", allow_mixed_backend=True)
    assert VectorIndex.open(tmp_path / "ix").backend == "mixed"
    ix.add(vectors[520:530], backend="torch/bf16")  # a mixed index checks nothing more
    assert len(ix) == 530


def test_an_index_without_a_recorded_backend_still_opens(tmp_path, vectors):
    folder = tmp_path / "ix"
    VectorIndex.build(folder, vectors[:100], model="default")
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["backend"]  # as written by older versions
    (folder / "manifest.json").write_text(json.dumps(manifest))
    ix = VectorIndex.open(folder)
    assert ix.backend is None
    ix.add(vectors[100:110], backend="onnx/int8")
    assert ix.search(vectors[:1], 1, backend="torch/fp32")[0][0].id == "0"
    assert "backend" not in json.loads((folder / "manifest.json").read_text())


def test_the_store_knows_nothing_of_faiss_and_keeps_any_structure_kind(tmp_path):
    """The segment store works for a structure kind it was merely told the name of, and imports no FAISS."""
    import ast

    from sbert.search.index.store import SegmentStore, new_manifest, new_tag

    tree = ast.parse(Path(store_module.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if "faiss" in m or "structures" in m}, imported
    store = SegmentStore(tmp_path / "ix", {"toy": ("size",)}, ".toy")
    manifest = new_manifest(model="m", model_path=None, backend=None, dim=4, metric="dot")
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / "notes.txt").write_text("the user's")
    with store.locked():
        tag = new_tag()
        seg = store.write_segment(tag, np.eye(4, dtype=np.float32)[:3], ["a", "b", "c"], None)
        first = store.write_structure("toy", tag, b"hello")
        snap = store.commit({**manifest, "segments": [seg], "structures": {"toy": {"size": 3, "file": first}}})
        assert snap.ids == ["a", "b", "c"] and snap.structure("toy", lambda handle, file: handle.read()) == b"hello"
        second = store.write_structure("toy", new_tag(), b"world")
        snap = store.commit({**snap.manifest, "structures": {"toy": {"size": 3, "file": second}}})
    kept = {p.name for p in (tmp_path / "ix").iterdir()}  # the old toy file collected, the user's file kept
    assert kept == {"manifest.json", ".lock", "notes.txt", second, seg["vectors"], seg["records"]}
    assert store.load().structure("toy", lambda handle, file: (file.name, handle.read())) == (second, b"world")
    broken = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    broken["structures"]["toy"]["size"] = "3"
    with pytest.raises(IndexFormatError, match=r"manifest\.json: 'structures\.toy\.size' must be a positive integer"):
        store.parse(json.dumps(broken).encode())


def test_each_structure_reads_back_what_it_wrote_and_skips_deleted_rows(tmp_path):
    """One interface for every structure: build, add, write, read back (checked), search without deleted rows."""
    from types import SimpleNamespace

    from sbert.search.index.structures import EXACT, STORED

    x = clustered(300, dim=32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    deleted = np.array([5, 17], np.int64)
    alive = np.ones(300, bool)
    alive[deleted] = False
    rows = SimpleNamespace(vectors=x, deleted=deleted, alive_bits=np.packbits(alive, bitorder="little"))
    queries = x[[5, 17, 40]]
    exact = EXACT.search(queries, 5, rows)
    assert_top_k(exact.scores, exact.indices, np.where(alive, queries.astype(np.float64) @ x.T, -9.0))
    for name, kind in STORED.items():
        config = {"M": 16, "ef_construction": 64, "ef_search": 64} if name == "hnsw" else {}
        built = kind.build(x[:200], config, progress=False)
        built.add(x[200:], progress=False)
        file = tmp_path / f"{name}.faiss"
        file.write_bytes(built.to_bytes())
        with open(file, "rb") as handle:
            loaded = kind.load(handle, file, config, 32, 300)
        found = loaded.search(queries, 5, rows)
        np.testing.assert_array_equal(found.indices, built.search(queries, 5, rows).indices)
        assert not np.isin(found.indices, deleted).any() and found.indices[2, 0] == 40, name
        with open(file, "rb") as handle, pytest.raises(IndexFormatError, match=f"{name}.faiss: holds 300 rows"):
            kind.load(handle, file, config, 32, 299)


_OPEN = """
import sys, threading
from sbert.search.index.folder import VectorIndex
index = VectorIndex.open(sys.argv[1])
index.search(index.vectors[:1], 2, method=sys.argv[2])
if sys.argv[3] == "thread":  # kept until the interpreter's last steps, after sbert's modules are cleared
    threading.main_thread().index = index
"""


@pytest.mark.slow
def test_a_process_that_opens_an_index_and_exits_prints_nothing(tmp_path, vectors):
    """An index dropped at exit closes its files quietly, also when it outlives the teardown of sbert's
    modules (kept on the main thread's object here; before, a ``__del__`` then found the modules' globals
    set to None and printed "Exception ignored in: Snapshot.__del__")."""
    import subprocess
    import sys

    VectorIndex.build(tmp_path / "ix", vectors, model="default", ann=True)
    for method, kept in (("hnsw", "thread"), ("exact", "thread"), ("exact", "main")):
        done = subprocess.run(
            [sys.executable, "-c", _OPEN, str(tmp_path / "ix"), method, kept], capture_output=True, text=True
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr


# -- the homes of an index, and what they share ------------------------------------------------------------
def test_each_location_finds_its_home():
    from sbert.search.index.base import BaseIndex
    from sbert.search.index.homes import HOMES, home_of, index_class, is_database_url
    from sbert.search.index.memory import MemoryIndex

    assert [home_of(x) for x in (None, "ix", Path("ix"), "postgresql://h/db", "postgres://h/db#t")] == [
        "memory", "folder", "folder", "postgresql", "postgresql",
    ]  # fmt: skip
    assert (index_class(None), index_class("some/folder")) == (MemoryIndex, VectorIndex)
    assert [is_database_url(x) for x in (None, "ix", "postgresql://h/db", "postgres://h/db")] == [0, 0, 1, 1]
    assert all(issubclass(home.load(), BaseIndex) for home in HOMES.values())


@pytest.mark.parametrize("where", ["folder", "memory"])
def test_the_mixed_backend_rule_is_the_same_in_every_home(tmp_path, vectors, where):
    """One rule (``base.backend_after_add``): another precision is refused unless allowed, then recorded as
    mixed, which stays mixed and checks nothing more; the same precision keeps the recorded backend."""
    from sbert.search.index.memory import MemoryIndex

    x = vectors[:10]
    ix = (
        VectorIndex.build(tmp_path / "ix", x, model="default", backend="torch/fp32")
        if where == "folder"
        else MemoryIndex.build(x, model="default", backend="torch/fp32")
    )
    ix.add(vectors[10:12], backend="onnx/fp32")
    assert ix.backend == "torch/fp32"  # same precision: comparable, nothing to record
    with pytest.raises(IndexMismatchError, match=r"index .* holds vectors made with torch/fp32; these are made with"):
        ix.add(vectors[12:14], backend="onnx/int8")
    assert len(ix) == 12 and ix.ids[-1] == "11"  # the refused rows were not added
    ix.add(vectors[12:14], backend="onnx/int8", allow_mixed_backend=True)
    ix.add(vectors[14:16], backend="torch/bf16")
    assert (ix.backend, len(ix), ix.ids[-1]) == ("mixed", 16, "15")


def test_the_rows_checks_are_the_same_in_every_home(tmp_path, vectors):
    from sbert.search.index.memory import MemoryIndex

    x = vectors[:12]
    for build in (
        lambda **kw: VectorIndex.build(tmp_path / "ix", x, model="default", overwrite=True, **kw),
        lambda **kw: MemoryIndex.build(x, model="default", **kw),
    ):
        with pytest.raises(ValueError, match=r"^12 embeddings but 6 ids and 0 texts$"):
            build(ids=list("abcdef"))
        with pytest.raises(ValueError, match=r"^texts must be strings \(or None\)$"):
            build(texts=[1] * 12)
        twice = [c for c in "abcdef" for _ in range(2)]
        with pytest.raises(
            ValueError, match=r"^ids must be unique in the index; repeated: \['a', 'b', 'c', 'd', 'e'\] \.\.\.$"
        ):
            build(ids=twice)
        with pytest.raises(ValueError, match=r"^k must be at least 1, got 0$"):
            build().search(x[:1], 0)


class _Letters:
    """A stand-in encoder: a text's vector counts its letters a, b, c."""

    runtime = "stub/fp32"

    def encode_document(self, texts, **options):
        return np.array([[t.count(c) + 0.1 for c in "abc"] for t in texts], dtype=np.float32)

    def resolve_prompt(self, *args, **options):
        return ""


def test_a_new_home_is_one_row_of_homes(monkeypatch):
    """``open_index`` and ``build_index`` find a home by its row alone: a row naming the memory index for
    ``toy://`` URLs builds a memory index there, and opens it as the memory index opens (it cannot)."""
    from sbert.search import retrieve
    from sbert.search.index import homes
    from sbert.search.index.memory import MemoryIndex

    monkeypatch.setitem(homes.HOMES, "toy", homes.Home("sbert.search.index.memory:MemoryIndex", ("toy://",)))
    assert homes.home_of("toy://here") == "toy" and homes.is_database_url("toy://here")
    built = retrieve.build_index("toy://here", _Letters(), ["aa", "bb", "cc"], ["x", "y", "z"], model="default")
    assert isinstance(built, MemoryIndex) and built.ids == ["x", "y", "z"] and built.backend == "stub/fp32"
    assert built.search(_Letters().encode_document(["b"]), 1)[0][0].id == "y"
    with pytest.raises(ValueError, match="not opened but built"):
        retrieve.open_index("toy://here")
