"""Damaged index files: every kind of damage gives sbert's own error naming the file, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.atomic import FolderNotReplaceableError
from sbert.cli import main
from sbert.errors import IndexExistsError, IndexFormatError
from sbert.search.index.folder import VectorIndex

DIM = 16


def make_index(folder: Path) -> VectorIndex:
    """Two segments (with texts), one deleted row, and an HNSW graph."""
    x = np.random.default_rng(0).normal(size=(40, DIM)).astype(np.float32)
    index = VectorIndex.build(folder, x[:30], model="default", texts=[f"t{i}" for i in range(30)], ann=True)
    index.add(x[30:], texts=[f"t{i}" for i in range(30, 40)])
    index.delete(["3"])
    return index


def edit_manifest(change: Callable[[dict], object]) -> Callable[[Path, dict], str]:
    def damage(folder: Path, manifest: dict) -> str:
        change(manifest)
        (folder / "manifest.json").write_text(json.dumps(manifest))
        return "manifest.json"

    return damage


def write_file(which: Callable[[dict], str], content: Callable[[bytes], bytes]) -> Callable[[Path, dict], str]:
    def damage(folder: Path, manifest: dict) -> str:
        file = folder / which(manifest)
        file.write_bytes(content(file.read_bytes()))
        return file.name

    return damage


def save_array(which: Callable[[dict], str], array: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path, dict], str]:
    def damage(folder: Path, manifest: dict) -> str:
        file = folder / which(manifest)
        np.save(file, array(np.load(file)))
        return file.name

    return damage


def edit_records(change: Callable[[list[dict]], object]) -> Callable[[Path, dict], str]:
    def damage(folder: Path, manifest: dict) -> str:
        file = folder / manifest["segments"][1]["records"]
        records = [json.loads(line) for line in file.read_text().splitlines()]
        change(records)
        file.write_text("".join(json.dumps(r) + "\n" for r in records))
        return file.name

    return damage


def seg(n: int) -> Callable[[dict], str]:
    return lambda m: m["segments"][n]["vectors"]


def records(n: int) -> Callable[[dict], str]:
    return lambda m: m["segments"][n]["records"]


def deleted(m: dict) -> str:
    return m["deleted"]


def hnsw(m: dict) -> str:
    return m["structures"]["hnsw"]["file"]


def other_hnsw(folder: Path, manifest: dict) -> str:
    """The graph of another, smaller index under the right name."""
    small = VectorIndex.build(folder.parent / "small", np.eye(DIM, dtype=np.float32), model="default", ann=True)
    (folder / hnsw(manifest)).write_bytes((small.path / hnsw(small.manifest)).read_bytes())
    return hnsw(manifest)


def int8_as_hnsw(folder: Path, manifest: dict) -> str:
    """A structure of the wrong kind under the hnsw name."""
    x = np.random.default_rng(1).normal(size=(40, DIM)).astype(np.float32)
    other = VectorIndex.build(folder.parent / "q", x, model="default", quantization="int8")
    (folder / hnsw(manifest)).write_bytes((other.path / other.manifest["structures"]["int8"]["file"]).read_bytes())
    return hnsw(manifest)


CASES = {
    "manifest empty": write_file(lambda m: "manifest.json", lambda b: b""),
    "manifest not UTF-8": write_file(lambda m: "manifest.json", lambda b: b"\xff\xfe" + b[:40]),
    "manifest a JSON list": write_file(lambda m: "manifest.json", lambda b: b"[1, 2]"),
    "manifest of a newer version": edit_manifest(lambda m: m.update(version=2)),
    "manifest without segments": edit_manifest(lambda m: m.pop("segments")),
    "dim a string": edit_manifest(lambda m: m.update(dim="16")),
    "dim zero": edit_manifest(lambda m: m.update(dim=0)),
    "unknown metric": edit_manifest(lambda m: m.update(metric="euclid")),
    "segments an object": edit_manifest(lambda m: m.update(segments={"a": 1})),
    "segment without rows": edit_manifest(lambda m: m["segments"][0].pop("rows")),
    "segment rows a string": edit_manifest(lambda m: m["segments"][0].update(rows="30")),
    "segment outside the folder": edit_manifest(lambda m: m["segments"][0].update(vectors="../other.npy")),
    "structures a list": edit_manifest(lambda m: m.update(structures=["hnsw"])),
    "unknown structure": edit_manifest(lambda m: m["structures"].update(ivf={"file": "ivf.faiss"})),
    "structure without file": edit_manifest(lambda m: m["structures"]["hnsw"].pop("file")),
    "ef_search a string": edit_manifest(lambda m: m["structures"]["hnsw"].update(ef_search="64")),
    "deleted a number": edit_manifest(lambda m: m.update(deleted=7)),
    "segment rows one too many": edit_manifest(lambda m: m["segments"][1].update(rows=11)),
    "vectors truncated": write_file(seg(0), lambda b: b[: len(b) // 2]),
    "vectors empty": write_file(seg(0), lambda b: b""),
    "vectors garbage": write_file(seg(1), lambda b: bytes(range(256)) * 4),
    "vectors a zip": write_file(seg(1), lambda b: b"PK\x03\x04" + b[4:]),
    "vectors float64": save_array(seg(0), lambda a: a.astype(np.float64)),
    "vectors too wide": save_array(seg(0), lambda a: np.hstack([a, a[:, :1]])),
    "vectors missing rows": save_array(seg(1), lambda a: a[:-1]),
    "vectors missing": lambda folder, m: (folder / seg(1)(m)).unlink() or seg(1)(m),
    "records one line short": write_file(records(1), lambda b: b"".join(b.splitlines(keepends=True)[:-1])),
    "records garbage line": write_file(records(1), lambda b: b + b"{oops\n"),
    "records not UTF-8": write_file(records(0), lambda b: b.replace(b"t1", b"\xe9t", 1)),
    "records without id": edit_records(lambda rs: rs[2].pop("id")),
    "record id a number": edit_records(lambda rs: rs[2].update(id=5)),
    "record text a list": edit_records(lambda rs: rs[2].update(text=["a"])),
    "record a list": edit_records(lambda rs: rs.__setitem__(2, ["id", "x"])),
    "an id on two live rows": edit_records(lambda rs: rs[2].update(id="0")),
    "deleted past the end": save_array(deleted, lambda a: np.array([3, 40], np.int64)),
    "deleted negative": save_array(deleted, lambda a: np.array([-1], np.int64)),
    "deleted floats": save_array(deleted, lambda a: a.astype(np.float32)),
    "deleted 2-D": save_array(deleted, lambda a: a.reshape(1, -1)),
    "deleted truncated": write_file(deleted, lambda b: b[:-4]),
    "deleted missing": lambda folder, m: (folder / deleted(m)).unlink() or deleted(m),
    "graph truncated": write_file(hnsw, lambda b: b[: len(b) // 2]),
    "graph empty": write_file(hnsw, lambda b: b""),
    "graph garbage": write_file(hnsw, lambda b: b"\x00IxHn" + bytes(range(256)) * 8),
    "graph of another index": other_hnsw,
    "graph of the wrong kind": int8_as_hnsw,
}


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_index_gives_a_clear_error_naming_the_file(tmp_path, case):
    folder = tmp_path / "ix"
    index = make_index(folder)
    culprit = CASES[case](folder, json.loads(json.dumps(index.manifest)))
    with pytest.raises(IndexFormatError) as caught:  # IndexFormatError and nothing else
        opened = VectorIndex.open(folder)
        for method in ("exact", "hnsw"):
            opened.search(np.ones((1, DIM), np.float32), 3, method=method)
    message = str(caught.value)
    assert culprit in message and str(folder) in message, message
    assert "damaged" in message or "manifest" in culprit, message


def test_a_truncated_segment_is_named_on_the_command_line(tmp_path):
    folder = tmp_path / "ix"
    index = make_index(folder)
    CASES["vectors truncated"](folder, index.manifest)
    result = CliRunner().invoke(main, ["index", "info", str(folder)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{folder / index.manifest['segments'][0]['vectors']}: damaged" in result.output
    assert "mmap length" in result.output  # the cause, after sbert's own words


def test_building_into_a_folder_of_other_files_is_refused_and_keeps_them(tmp_path):
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "thesis.txt").write_text("years of work")
    (docs / "seg-notes.npy").write_text("not an index file")
    x = np.random.default_rng(0).normal(size=(5, DIM)).astype(np.float32)
    for overwrite in (False, True):
        with pytest.raises(FolderNotReplaceableError, match=r"mydocs: a folder that holds other files \(seg-notes"):
            VectorIndex.build(docs, x, model="default", overwrite=overwrite)
    assert sorted(p.name for p in docs.iterdir()) == ["seg-notes.npy", "thesis.txt"]
    result = CliRunner().invoke(main, ["index", "build", str(docs / "thesis.txt"), "--out", str(docs)])
    assert result.exit_code == 1 and "no sbert index" in result.output
    assert (docs / "thesis.txt").read_text() == "years of work"


def test_replacing_an_index_keeps_the_users_files_beside_it(tmp_path):
    folder = tmp_path / "ix"
    x = np.random.default_rng(0).normal(size=(5, DIM)).astype(np.float32)
    old = VectorIndex.build(folder, x, model="default", ann=True)
    (folder / "README.md").write_text("what this index holds")
    with pytest.raises(IndexExistsError, match="overwrite"):
        VectorIndex.build(folder, x, model="default")
    new = VectorIndex.build(folder, x[:3], model="default", overwrite=True)
    assert len(VectorIndex.open(folder)) == 3 and new.structures == []
    names = {p.name for p in folder.iterdir()}
    assert names == {
        "README.md",
        "manifest.json",
        ".lock",
        *(new.manifest["segments"][0][k] for k in ("vectors", "records")),
    }
    assert old.manifest["segments"][0]["vectors"] not in names
    # an empty folder, and one left by an interrupted first build (only index files), are fine
    (tmp_path / "empty").mkdir()
    VectorIndex.build(tmp_path / "empty", x, model="default")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / ".lock").touch()
    (tmp_path / "half" / ".seg-20240101000000-0123abcd.npy.tmp-77-89abcdef").touch()
    VectorIndex.build(tmp_path / "half", x, model="default")
    assert not (tmp_path / "half" / ".seg-20240101000000-0123abcd.npy.tmp-77-89abcdef").exists()
