"""sbert.parallel's shard folders under faults: killed runs, a second writer, another input, damaged or
edited files (docs/scale.md, "Many processes on one machine")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from sbert.parallel import ShardFolder, ShardFolderError, encode_to_shards, load_table, load_vectors
from sbert.parallel.inputs import chunks, input_fingerprint
from sbert.parallel.shards import ShardFolderLockedError, write_shard_files
from sbert.parallel.worker import KILL_AT_SHARD_ENV

SETTINGS = {"model": "m", "backend": "torch", "precision": "fp32", "shard_size": 2, "dim": None}
TEXTS = ["t0", "t1", "t2", "t3", "t4"]


def _write_folder(path, texts: list[str] = TEXTS, source: dict | None = None) -> None:
    """A complete shard folder of ``texts`` (vectors: row i is i, i+1, i+2), written without a model."""
    vectors = np.arange(len(texts) * 3, dtype=np.float32).reshape(-1, 3)
    with ShardFolder.open(path, SETTINGS, resume=True, source=source) as folder:
        for chunk in chunks(texts, 2):
            record = write_shard_files(path, chunk.index, chunk.start, chunk.texts, vectors[chunk.start :][:2])
            folder.record(chunk.index, record, chunk.digest)
        folder.finish(len(texts), (len(texts) + 1) // 2)


def _manifest(path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def _edit_manifest(path, change) -> None:
    manifest = _manifest(path)
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


def _is_done(path, index: int) -> bool:
    chunk = list(chunks(TEXTS, 2))[index]
    return ShardFolder.read(path).is_done(index, chunk.digest)


# -- fast: the lock, the input's fingerprint, checksums and names ---------------------------------------------


HOLD = """
import sys
from sbert.parallel import ShardFolder
folder = ShardFolder.open(sys.argv[1], {"model": "m", "shard_size": 2, "dim": None}, resume=True)
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_second_writer_is_refused_naming_the_folder_and_the_holder(tmp_path):
    out, source = tmp_path / "out", tmp_path / "in.txt"
    source.write_text("a text\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        message = rf"{out}: another run \(process {holder.pid}\) is writing into this folder"
        with pytest.raises(ShardFolderLockedError, match=message):
            encode_to_shards("default", source, out, processes=2)
        with pytest.raises(ShardFolderLockedError, match=message):
            ShardFolder.open(out, {**SETTINGS, "shard_size": 2}, resume=False)
        assert (out / "manifest.json").exists()  # the refused writer removed nothing
    finally:
        holder.kill()  # SIGKILL: the kernel lets go of the lock, no stale lock is left behind
        holder.wait()
    ShardFolder.open(out, SETTINGS, resume=False).close()


def test_resume_from_another_input_is_refused_naming_both_fingerprints(tmp_path):
    first, second, copy = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "copy-of-a.txt"
    first.write_text("t0\nt1\nt2\nt3\nt4\n")
    second.write_text("t0\nt1\nt2\nt3\nother\n")
    copy.write_bytes(first.read_bytes())
    out = tmp_path / "out"
    _write_folder(out, source=input_fingerprint(first))
    old, new = input_fingerprint(first), input_fingerprint(second)
    assert _manifest(out)["input"] == old and old["sha256"] != new["sha256"]
    with pytest.raises(ShardFolderError, match="made from another input") as caught:
        encode_to_shards("default", second, out, shard_size=2)
    for part in (str(first), str(second), old["sha256"], new["sha256"]):
        assert part in str(caught.value)
    # the same content under another name resumes (nothing to encode: every shard is kept)
    ShardFolder.open(out, SETTINGS, resume=True, source=input_fingerprint(copy)).close()
    assert _manifest(out)["input"]["path"] == str(copy.resolve())
    # starting over is allowed
    ShardFolder.open(out, SETTINGS, resume=False, source=new).close()
    assert _manifest(out)["input"] == new and _manifest(out)["shards"] == {}


@pytest.mark.parametrize("damage", ["truncated", "zero-filled", "another shard's"])
def test_a_damaged_parquet_is_not_kept_on_resume_and_is_named_on_read(tmp_path, damage):
    out = tmp_path / "out"
    _write_folder(out)
    table = out / "shard-000001.parquet"
    data = table.read_bytes()
    if damage == "truncated":
        table.write_bytes(data[: len(data) // 2])
    elif damage == "zero-filled":
        table.write_bytes(bytes(len(data)))
    else:
        table.write_bytes((out / "shard-000000.parquet").read_bytes())
    assert _is_done(out, 0) and not _is_done(out, 1) and _is_done(out, 2)
    with pytest.raises(ShardFolderError, match=r"shard-000001\.parquet: its checksum differs"):
        load_table(out)
    with pytest.raises(ShardFolderError, match=r"shard-000001\.parquet: (not a readable shard table|holds 2 rows)"):
        load_table(out, verify=False)


@pytest.mark.parametrize(
    ("field", "name"),
    [("table", "/etc/shadow"), ("vectors", "../elsewhere/shard-000001.npy"), ("table", "shard-000000.parquet")],
)
def test_a_manifest_naming_a_file_outside_the_folder_or_another_shards_is_refused(tmp_path, field, name):
    out = tmp_path / "out"
    _write_folder(out)
    _edit_manifest(out, lambda m: m["shards"]["1"].update({field: name}))
    expected = "shard-000001.parquet" if field == "table" else "shard-000001.npy"
    message = rf"manifest\.json: shard '1' names '{name}' as its '{field}' file; expected '{expected}'"
    for read in (load_table, load_vectors, ShardFolder.read):
        with pytest.raises(ShardFolderError, match=message):
            read(out)
    with pytest.raises(ShardFolderError, match=message):
        ShardFolder.open(out, SETTINGS, resume=True)
    ShardFolder.open(out, SETTINGS, resume=False).close()  # starting over gets past it
    assert _manifest(out)["shards"] == {} and not (out / "shard-000001.parquet").exists()


def test_a_shard_file_that_is_a_link_is_refused(tmp_path):
    out = tmp_path / "out"
    _write_folder(out)
    outside = tmp_path / "outside.parquet"
    (out / "shard-000001.parquet").rename(outside)
    (out / "shard-000001.parquet").symlink_to(outside)
    with pytest.raises(ShardFolderError, match=r"shard-000001\.parquet: is a link"):
        load_table(out)
    assert not _is_done(out, 1)


def test_a_folder_written_before_parquet_checksums_still_loads_and_resume_checks_its_tables(tmp_path):
    out = tmp_path / "out"
    _write_folder(out)

    def make_old(manifest: dict) -> None:
        manifest.update(version=1)
        del manifest["input"]
        for record in manifest["shards"].values():
            del record["table_sha256"]

    _edit_manifest(out, make_old)
    assert load_table(out)["text"].to_pylist() == TEXTS
    assert load_vectors(out).shape == (5, 3)
    assert _is_done(out, 1)
    (out / "shard-000001.parquet").write_bytes((out / "shard-000000.parquet").read_bytes())  # valid, other rows
    assert not _is_done(out, 1)
    with pytest.raises(ShardFolderError, match=r"shard-000001\.parquet: holds 2 rows, not ids 2\.\.3"):
        load_table(out)


# -- slow: real runs of `python -m sbert encode --processes 2`, killed ------------------------------------------


@pytest.fixture(scope="module")
def texts(stsb_sentences) -> list[str]:
    return stsb_sentences[:150] * 2  # 19 shards of 16: still running when the first is recorded


@pytest.fixture(scope="module")
def expected(model, stsb_sentences) -> np.ndarray:
    return np.tile(model.encode(stsb_sentences[:150]), (2, 1))


def _start(texts: list[str], tmp_path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """``sbert encode --processes 2`` of ``texts`` into tmp_path/out, once it has recorded a shard (so both
    workers run); returns it and its descendants (the workers and multiprocessing's resource tracker)."""
    source, out = tmp_path / "in.txt", tmp_path / "out"
    source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    args = [str(source), "--out", str(out), "--processes", "2", "--shard-size", "16", "--batch-size", "16"]
    env = {k: v for k, v in os.environ.items() if k != KILL_AT_SHARD_ENV}
    command = [sys.executable, "-m", "sbert", "encode", *args]
    parent = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 240
    while not (out / "manifest.json").exists() or not _manifest(out)["shards"]:
        assert parent.poll() is None, parent.communicate()
        assert time.monotonic() < deadline, "no shard recorded in 240 s"
        time.sleep(0.05)
    workers = psutil.Process(parent.pid).children(recursive=True)
    assert sum("multiprocessing" in " ".join(w.cmdline()) for w in workers) >= 2, [w.cmdline() for w in workers]
    return parent, workers


def _left(processes: list[psutil.Process], within: float) -> list[psutil.Process]:
    """Those of ``processes`` still alive (not zombies) after up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        alive = []
        for process in processes:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(process)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def test_killing_the_parent_with_sigkill_leaves_no_worker(texts, tmp_path):
    parent, workers = _start(texts, tmp_path)
    try:
        parent.kill()
        parent.wait(timeout=30)
        assert _left(workers, within=10) == []
        assert not _manifest(tmp_path / "out")["complete"]
        ShardFolder.open(tmp_path / "out", {}, resume=False).close()  # and no lock left behind
    finally:
        for process in _left(workers, within=0):
            process.kill()


def test_sigterm_stops_the_run_with_a_message_and_the_folder_resumes(texts, expected, tmp_path):
    parent, workers = _start(texts, tmp_path)
    try:
        parent.send_signal(signal.SIGTERM)
        _, stderr = parent.communicate(timeout=60)
        assert _left(workers, within=10) == []
    finally:
        for process in _left(workers, within=0):
            process.kill()
    out = tmp_path / "out"
    assert parent.returncode == 1, stderr
    assert f"{out}: stopped by SIGTERM; the worker processes were ended; the" in stderr
    assert "finished shards are kept: run the same command again" in stderr and "Traceback" not in stderr
    kept = {int(k) for k in _manifest(out)["shards"]}
    assert kept and not _manifest(out)["complete"]
    run = encode_to_shards("default", tmp_path / "in.txt", out, processes=1, shard_size=16, batch_size=16)
    assert sorted(run.skipped) == sorted(kept) and sorted(run.written + run.skipped) == list(range(19))
    np.testing.assert_allclose(load_vectors(out), expected, atol=1e-6, rtol=0)
    assert load_table(out)["text"].to_pylist() == texts
