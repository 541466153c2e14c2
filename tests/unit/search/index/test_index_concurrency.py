"""Several processes on one index: writers wait for each other and lose nothing; readers never fail."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from sbert.search.index.folder import IndexLockedError, VectorIndex

pytestmark = pytest.mark.slow  # starts processes

DIM = 16

KINDS = {"exact": {}, "hnsw": {"ann": True, "ef_construction": 16}}

# A writer process: opens the indexes in FOLDERS (comma-separated), waits until every writer is ready (so
# that all of them hold the same versions before the first write), then adds ``rounds`` batches of
# ``rows`` rows with ids "<name>-<n>" to each. With "delete", it also adds and deletes junk rows between
# rounds: a third of the index every other round (a compaction, which rewrites every file), else one.
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import numpy as np
    from sbert.search.index.folder import VectorIndex

    folders, name, rounds, rows, dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    go, delete = Path(sys.argv[6]), sys.argv[7] == "delete"
    indexes = [VectorIndex.open(folder, lock_timeout=120) for folder in folders.split(",")]
    Path(go.parent / f"ready-{name}").touch()
    while not go.exists():
        time.sleep(0.01)
    rng = np.random.default_rng(sum(map(ord, name)))
    for r in range(rounds):
        ids = [f"{name}-{r * rows + i}" for i in range(rows)]
        x = rng.normal(size=(rows, dim)).astype(np.float32)
        for index in indexes:
            index.add(x, ids=ids, texts=ids)
            if delete:
                junk = [f"junk-{r}-{i}" for i in range(len(index) // 2 if r % 2 else 1)]
                index.add(rng.normal(size=(len(junk), dim)).astype(np.float32), ids=junk)
                index.delete(junk)
    """
)


def build_both(root: Path, x: np.ndarray, **kwargs) -> list[Path]:
    """An exact-only and an HNSW index of ``x`` under ``root``."""
    for kind, options in KINDS.items():
        VectorIndex.build(root / kind, x, model="default", **options, **kwargs)
    return [root / kind for kind in KINDS]


def start_writers(folders: list[Path], names: list[str], rounds: int, rows: int, delete: bool = False):
    root = folders[0].parent
    go, mode, where = root / "go", "delete" if delete else "add", ",".join(map(str, folders))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, where, name, *map(str, (rounds, rows, DIM, go)), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    deadline = time.monotonic() + 60
    while not all((root / f"ready-{n}").exists() for n in names):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            finish(procs, timeout=1)
            pytest.fail("the writers did not start")
        time.sleep(0.02)
    go.touch()
    return procs


def finish(procs, timeout: float = 120) -> None:
    try:
        for p in procs:
            _, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_two_writer_processes_lose_nothing(tmp_path):
    base = np.random.default_rng(0).normal(size=(50, DIM)).astype(np.float32)
    folders = build_both(tmp_path, base, ids=[f"base-{i}" for i in range(50)])
    finish(start_writers(folders, ["a", "b"], rounds=5, rows=10))
    expected = {f"base-{i}" for i in range(50)} | {f"{w}-{i}" for w in "ab" for i in range(50)}
    for folder in folders:
        index = VectorIndex.open(folder)
        assert set(index.ids) == expected and len(index) == 150, folder.name
        # every row is in the search structure: each added row is its own best match
        rows = [index.row_of["a-0"], index.row_of["b-49"]]
        assert [h[0].id for h in index.search(index.vectors[rows], 1)] == ["a-0", "b-49"]
        leftovers = {p.name for p in folder.iterdir()} - {"manifest.json", ".lock"}
        named = {s[k] for s in index.manifest["segments"] for k in ("vectors", "records")}
        assert leftovers == named | {e["file"] for e in index.manifest["structures"].values()}


def test_a_long_lived_reader_keeps_answering_while_another_process_writes(tmp_path):
    base = np.random.default_rng(1).normal(size=(200, DIM)).astype(np.float32)
    folders = build_both(tmp_path, base)
    readers = [VectorIndex.open(folder) for folder in folders]
    for reader in readers:
        reader.search(base[:2], 3)  # structures loaded before the writer starts
    idle = [VectorIndex.open(folder) for folder in folders]  # first search after the writer removed its files
    procs = start_writers(folders, ["w"], rounds=6, rows=30, delete=True)  # adds, deletes, compactions
    searches = 0
    try:
        while procs[0].poll() is None:
            for reader in readers:
                hits = reader.search(base[:5], 3)
                assert [h[0].id for h in hits] == ["0", "1", "2", "3", "4"]
            searches += 1
            time.sleep(0.005)
            if searches % 5 == 0:  # readers opened while the writer works
                for folder in folders:
                    assert VectorIndex.open(folder).search(base[:1], 1)[0][0].id == "0"
    finally:
        finish(procs)
    assert searches > 0
    for folder, reader in zip(folders, readers, strict=True):
        # The reader moved to the writer's last version by itself: the rows added are found.
        final = VectorIndex.open(folder)
        last = final.row_of["w-179"]
        assert reader.search(final.vectors[[last]], 1)[0][0].id == "w-179"
        assert len(reader) == len(final) == 380
    assert [r.search(base[:1], 1)[0][0].id for r in idle] == ["0", "0"]


def test_a_second_writer_waits_for_the_lock_and_names_it(tmp_path, caplog):
    folder = tmp_path / "ix"
    x = np.random.default_rng(2).normal(size=(20, DIM)).astype(np.float32)
    VectorIndex.build(folder, x, model="default")
    with open(folder / ".lock", "a+") as holder:  # another writer, holding the lock
        fcntl.flock(holder, fcntl.LOCK_EX)
        holder.truncate(0)
        holder.write("4242\n")
        holder.flush()
        index = VectorIndex.open(folder, lock_timeout=0.3)
        started = time.monotonic()
        with pytest.raises(IndexLockedError, match=r"another writer \(process 4242\) still holds the lock .*\.lock"):
            index.add(x[:2])
        assert time.monotonic() - started >= 0.3
        # Released while the second writer waits: it then goes on, from the newest version.
        index.lock_timeout = 30
        threading.Timer(0.5, lambda: fcntl.flock(holder, fcntl.LOCK_UN)).start()
        with caplog.at_level(logging.WARNING, logger="sbert.search.index.store"):
            index.add(x[:2], ids=["new-0", "new-1"])
        assert f"holds the lock {folder / '.lock'}; waiting up to 30 s" in caplog.text
        assert len(VectorIndex.open(folder)) == 22


def test_a_writer_adds_to_the_newest_version_not_to_the_one_it_opened(tmp_path):
    folder = tmp_path / "ix"
    x = np.random.default_rng(3).normal(size=(30, DIM)).astype(np.float32)
    VectorIndex.build(folder, x[:10], model="default")
    first, second = VectorIndex.open(folder), VectorIndex.open(folder)
    first.add(x[10:20])  # default ids continue: 10 ... 19
    second.add(x[20:])  # opened before that add: still continues after it
    assert second.ids == [str(i) for i in range(30)] and len(VectorIndex.open(folder)) == 30
    first.delete(["25"])  # first had never seen row 25
    assert "25" not in VectorIndex.open(folder).row_of


def test_a_reader_keeps_its_version_when_the_new_one_cannot_be_used(tmp_path):
    folder = tmp_path / "ix"
    x = np.random.default_rng(4).normal(size=(20, DIM)).astype(np.float32)
    VectorIndex.build(folder, x, model="default")
    reader = VectorIndex.open(folder)
    VectorIndex.build(folder, x[:, :8], model="default", overwrite=True)  # another width: not usable here
    with pytest.warns(UserWarning, match="keeping the version already loaded.*dim changed from 16 to 8"):
        hits = reader.search(x[:1], 1)
    assert hits[0][0].id == "0"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["dim"] == 8 and os.path.exists(folder / "manifest.json")


def test_a_served_index_answers_from_the_newest_version(tmp_path, model):
    """`sbert serve --index` while another process adds: every /search answers, and finds the new rows."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from sbert.serve.app import create_app

    folder = tmp_path / "ix"
    texts = ["Bread is baked in an oven.", "Cats sleep a lot.", "A recipe for pasta.", "The train was late."]
    VectorIndex.build(folder, model.encode(texts), model="default", texts=texts, ann=True)
    more = ["Shares fell sharply on the stock market.", "It rained all day."]
    np.save(tmp_path / "more.npy", model.encode(more))
    add = (
        "import sys, numpy as np; from sbert.search.index.folder import VectorIndex; "
        "VectorIndex.open(sys.argv[1]).add(np.load(sys.argv[2]), ids=['news', 'rain'], texts=sys.argv[3:])"
    )
    with TestClient(create_app(model, model_name="default", index=VectorIndex.open(folder))) as client:
        first = client.post("/search", json={"query": "stock prices dropped", "k": 1})
        assert first.status_code == 200 and first.json()["results"][0]["hits"][0]["id"] != "news"
        writer = subprocess.run(
            [sys.executable, "-c", add, str(folder), str(tmp_path / "more.npy"), *more], capture_output=True, text=True
        )
        assert writer.returncode == 0, writer.stderr
        for method in (None, "exact", "hnsw"):
            body = {"query": "stock prices dropped", "k": 1, **({"method": method} if method else {})}
            answer = client.post("/search", json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["results"][0]["hits"][0]["id"] == "news", method
