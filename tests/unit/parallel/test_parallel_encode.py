"""sbert.parallel: encode with N worker processes into a resumable folder of shards (docs/scale.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.cli import main
from sbert.errors import InputFileError
from sbert.parallel import ShardFolder, ShardFolderError, encode_to_shards, load_table, load_vectors
from sbert.parallel.guard import MainGuardError, _guarded
from sbert.parallel.inputs import chunks, iter_texts
from sbert.parallel.shards import write_shard_files
from sbert.parallel.worker import KILL_AT_SHARD_ENV

SETTINGS = {"model": "m", "backend": "torch", "precision": "fp32", "shard_size": 2, "dim": None}


# -- fast: the shard folder, input chunks, the guard check, bad input -----------------------------------------


def _write_folder(path, texts: list[str], vectors: np.ndarray, size: int = 2) -> ShardFolder:
    """A complete shard folder written without a model, as the coordinator would record it."""
    folder = ShardFolder.open(path, {**SETTINGS, "shard_size": size}, resume=True)
    for chunk in chunks(texts, size):
        record = write_shard_files(
            path, chunk.index, chunk.start, chunk.texts, vectors[chunk.start : chunk.start + size]
        )
        folder.record(chunk.index, record, chunk.digest)
    folder.finish(len(texts), (len(texts) + size - 1) // size)
    folder.close()  # lets go of the folder's lock, as the end of a run does
    return folder


def test_chunks_cut_the_stream_in_order_with_a_short_last_one():
    got = [(c.index, c.start, c.texts) for c in chunks(iter("abcde"), 2)]
    assert got == [(0, 0, ["a", "b"]), (1, 2, ["c", "d"]), (2, 4, ["e"])]
    assert next(chunks(["a"], 1)).digest != next(chunks(["b"], 1)).digest


CORPUS = {  # one corpus in every format the reader knows: (file name, content)
    "lines": ("c.txt", "Crash on save\nSlow start\n"),
    "jsonl": ("c.jsonl", '{"id": "b1", "title": "Crash", "text": "on save"}\n{"id": "b2", "text": "Slow start"}\n'),
    "csv": ("c.csv", "id,title,text\nb1,Crash,on save\nb2,,Slow start\n"),
    "tsv": ("c.tsv", "id\ttitle\ttext\nb1\tCrash\ton save\nb2\t\tSlow start\n"),
}


@pytest.mark.parametrize("fmt", list(CORPUS))
def test_every_corpus_format_streams_its_texts_as_embedded_with_their_ids(tmp_path, fmt):
    from sbert.data.corpus import CORPUS_FORMATS, corpus_format, read_corpus

    assert set(CORPUS) == set(CORPUS_FORMATS)  # every format of the table is streamed here
    name, content = CORPUS[fmt]
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    assert corpus_format(path) == fmt
    got = list(chunks(iter_texts(path), 1))
    corpus = read_corpus(path)
    assert [c.texts[0] for c in got] == corpus.joined()  # the texts sharded encoding embeds: read_corpus's
    if fmt == "lines":
        assert [c.texts[0] for c in got] == ["Crash on save", "Slow start"] and got[0].ids is None
    else:
        assert [c.texts[0] for c in got] == ["Crash on save", "Slow start"] and [c.ids for c in got] == [["b1"], ["b2"]]


def test_a_stream_with_ids_on_some_records_only_is_refused_and_shards_keep_ids(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "one"}\n{"text": "two"}\n', encoding="utf-8")
    with pytest.raises(InputFileError, match=r"c.jsonl: line 2: no id, unlike the records before it"):
        list(iter_texts(path))
    (chunk,) = chunks([("a", "one"), ("b", "two")], 2)
    assert (chunk.texts, chunk.ids) == (["one", "two"], ["a", "b"])
    write_shard_files(tmp_path, 0, 0, chunk.texts, np.eye(2, dtype=np.float32), chunk.ids)
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "shard-000000.parquet")
    assert table["corpus_id"].to_pylist() == ["a", "b"] and table["id"].to_pylist() == [0, 1]


def test_shard_folder_round_trip_in_input_order(tmp_path):
    texts = ["t0", "t1", "t2", "t3", "t4"]
    vectors = np.arange(15, dtype=np.float32).reshape(5, 3)
    _write_folder(tmp_path / "out", texts, vectors)
    np.testing.assert_array_equal(load_vectors(tmp_path / "out"), vectors)
    table = load_table(tmp_path / "out")
    assert table["id"].to_pylist() == [0, 1, 2, 3, 4] and table["text"].to_pylist() == texts
    np.testing.assert_array_equal(np.array(table["embedding"].to_pylist(), dtype=np.float32), vectors)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["complete"], manifest["rows"], manifest["count"], manifest["settings"]["dim"]) == (True, 5, 3, 3)
    assert [manifest["shards"][str(i)]["rows"] for i in range(3)] == [2, 2, 1]


def test_a_damaged_or_missing_shard_is_named_on_read(tmp_path):
    folder = _write_folder(tmp_path / "out", ["a", "b", "c"], np.ones((3, 2), dtype=np.float32))
    shard = tmp_path / "out" / "shard-000001.npy"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(ShardFolderError, match=r"shard-000001\.npy: its checksum differs"):
        load_vectors(tmp_path / "out")
    assert not folder.is_done(1, next(iter(c for c in chunks(["a", "b", "c"], 2) if c.index == 1)).digest)
    shard.unlink()
    with pytest.raises(ShardFolderError, match=r"shard-000001\.npy: missing"):
        load_vectors(tmp_path / "out")


def test_resume_with_other_settings_or_other_texts_is_refused(tmp_path):
    _write_folder(tmp_path / "out", ["a", "b", "c"], np.ones((3, 2), dtype=np.float32))
    with pytest.raises(ShardFolderError, match=r"other settings \(precision: 'fp32' there, 'int8' now\)"):
        ShardFolder.open(tmp_path / "out", {**SETTINGS, "precision": "int8"}, resume=True)
    with (
        ShardFolder.open(tmp_path / "out", SETTINGS, resume=True) as folder,
        pytest.raises(ShardFolderError, match=r"shard 0 .*other texts"),
    ):
        folder.is_done(0, next(chunks(["a", "changed"], 2)).digest)
    # without resume the old shards go, and nothing else in the folder
    (tmp_path / "out" / "notes.txt").write_text("mine")
    ShardFolder.open(tmp_path / "out", SETTINGS, resume=False).close()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".lock", "manifest.json", "notes.txt"]
    with pytest.raises(ShardFolderError, match="has not finished"):
        load_vectors(tmp_path / "out")


def test_bad_input_gives_clear_errors_before_any_work(tmp_path):
    with pytest.raises(InputFileError, match=r"missing\.txt: no such file"):
        encode_to_shards("default", tmp_path / "missing.txt", tmp_path / "out", processes=2)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputFileError, match=r"empty\.txt: holds no texts"):
        encode_to_shards("default", tmp_path / "empty.txt", tmp_path / "out", processes=2)
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputFileError, match="item 2 of the input is empty"):
        encode_to_shards("default", ["a", " "], tmp_path / "out2")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "photo.jpg").write_bytes(b"x")
    (tmp_path / "in.txt").write_text("a text\n")
    with pytest.raises(ShardFolderError, match=r"holds other files \(photo\.jpg\) and no manifest\.json"):
        encode_to_shards("default", tmp_path / "in.txt", tmp_path / "theirs", processes=2)
    assert [p.name for p in (tmp_path / "theirs").iterdir()] == ["photo.jpg"]


def test_cli_bad_input_and_misused_options(tmp_path):
    runner = CliRunner()
    (tmp_path / "in.txt").write_text("a text\n")
    result = runner.invoke(
        main, ["encode", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o"), "--processes", "2"]
    )
    assert result.exit_code == 1 and "nope.txt: no such file" in result.output
    result = runner.invoke(
        main, ["encode", str(tmp_path / "in.txt"), "--out", str(tmp_path / "e.npy"), "--processes", "2"]
    )
    assert result.exit_code == 2 and "not one .npy or .jsonl file: give a folder" in result.output
    result = runner.invoke(main, ["encode", str(tmp_path / "in.txt"), "--processes", "2"])
    assert result.exit_code == 2 and "give it with --out DIR" in result.output
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "a.csv").write_text("x")
    result = runner.invoke(main, ["encode", str(tmp_path / "in.txt"), "--out", str(tmp_path / "theirs")])
    assert result.exit_code == 1 and "holds other files (a.csv)" in result.output


def test_guard_detection_reads_the_calling_line():
    source = "import x\nx.run()\nif __name__ == '__main__':\n    x.run()\n"
    assert not _guarded(source, 2) and _guarded(source, 4)
    assert _guarded("if '__main__' == __name__:\n    go()\n", 2)


# -- slow: real worker processes and the default model --------------------------------------------------------


@pytest.fixture(scope="module")
def texts(stsb_sentences) -> list[str]:
    return stsb_sentences[:300]


@pytest.fixture(scope="module")
def expected(model, texts) -> np.ndarray:
    return model.encode(texts)


@pytest.fixture(scope="module")
def sharded(texts, tmp_path_factory):
    out = tmp_path_factory.mktemp("parallel") / "out"
    run = encode_to_shards("default", texts, out, processes=2, shard_size=64, batch_size=16)
    return out, run


def test_two_processes_equal_single_process_encode_in_input_order(sharded, texts, expected):
    out, run = sharded
    assert (run.rows, run.shards, sorted(run.written), run.skipped) == (300, 5, [0, 1, 2, 3, 4], [])
    got = load_vectors(out)
    assert got.shape == (300, 384) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    table = load_table(out)
    assert table["id"].to_pylist() == list(range(300)) and table["text"].to_pylist() == texts
    np.testing.assert_array_equal(np.array(table["embedding"].to_pylist(), dtype=np.float32), got)
    settings = json.loads((out / "manifest.json").read_text())["settings"]
    assert (settings["model"], settings["backend"], settings["dim"], settings["shard_size"]) == (
        "all-MiniLM-L6-v2",
        "torch",
        384,
        64,
    )


def test_sharded_encoding_of_a_csv_equals_encode_and_keeps_its_ids(model, tmp_path):
    path = tmp_path / "texts.csv"
    path.write_text("id,title,text\nb1,Crash,on save\nb2,,Slow start\nb3,Printer,prints blank pages\n")
    result = CliRunner().invoke(
        main, ["encode", str(path), "--processes", "1", "--out", str(tmp_path / "shards"), "--shard-size", "2"]
    )
    assert result.exit_code == 0, result.output
    joined = ["Crash on save", "Slow start", "Printer prints blank pages"]  # each title before its text
    np.testing.assert_allclose(load_vectors(tmp_path / "shards"), model.encode(joined), atol=1e-6, rtol=0)
    table = load_table(tmp_path / "shards")
    assert table["text"].to_pylist() == joined and table["corpus_id"].to_pylist() == ["b1", "b2", "b3"]


def test_resume_recomputes_only_the_deleted_shard(sharded, texts, expected, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(sharded[0], out)
    (out / "shard-000002.npy").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*") if "000002" not in p.name}
    run = encode_to_shards("default", texts, out, processes=1, shard_size=64, batch_size=16)
    assert (run.written, run.skipped) == ([2], [0, 1, 3, 4])
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*") if "000002" not in p.name} == before
    np.testing.assert_allclose(load_vectors(out), expected, atol=1e-6, rtol=0)


def test_resume_re_encodes_damaged_parquet_and_npy_shards_and_equals_a_clean_run(sharded, texts, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(sharded[0], out)
    table = out / "shard-000001.parquet"
    table.write_bytes(table.read_bytes()[: table.stat().st_size // 2])  # truncated
    (out / "shard-000003.parquet").write_bytes(bytes((out / "shard-000003.parquet").stat().st_size))  # zeros
    vectors = out / "shard-000004.npy"
    data = bytearray(vectors.read_bytes())
    data[-1] ^= 1
    vectors.write_bytes(bytes(data))
    with pytest.raises(ShardFolderError, match=r"shard-000001\.parquet: its checksum differs"):
        load_table(out)
    run = encode_to_shards("default", texts, out, processes=1, shard_size=64, batch_size=16)
    assert (sorted(run.written), run.skipped) == ([1, 3, 4], [0, 2])
    # equal to the clean run (within 1e-6: this process runs other thread counts than its workers)
    np.testing.assert_allclose(load_vectors(out), load_vectors(sharded[0]), atol=1e-6, rtol=0)
    got, clean = load_table(out), load_table(sharded[0])
    assert got["id"].to_pylist() == clean["id"].to_pylist() and got["text"].to_pylist() == texts
    np.testing.assert_allclose(
        np.array(got["embedding"].to_pylist()), np.array(clean["embedding"].to_pylist()), atol=1e-6, rtol=0
    )


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != KILL_AT_SHARD_ENV} | env
    command = [sys.executable, "-m", "sbert", "encode", *args]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)


def test_a_killed_worker_is_reported_and_resume_completes_nothing_lost(texts, expected, tmp_path):
    source, out = tmp_path / "big.txt", tmp_path / "out"
    source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    args = [str(source), "--out", str(out), "--processes", "2", "--shard-size", "64", "--batch-size", "16"]
    killed = _cli(args, **{KILL_AT_SHARD_ENV: "3"})
    assert killed.returncode == 1, killed.stderr
    assert "a worker process died" in killed.stderr and "resume" in killed.stderr
    recorded = {int(k) for k in json.loads((out / "manifest.json").read_text())["shards"]}
    assert 3 not in recorded
    resumed = _cli([*args[:3], "--processes", "1", "--shard-size", "64", "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert f"{5 - len(recorded)} encoded now" in resumed.stderr
    np.testing.assert_allclose(load_vectors(out), expected, atol=1e-6, rtol=0)
    assert load_table(out)["id"].to_pylist() == list(range(300))


@pytest.mark.slow
def test_a_script_without_the_main_guard_is_refused(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from sbert.parallel import encode_to_shards
            encode_to_shards("default", ["a", "b"], {str(tmp_path / "out")!r}, processes=2)
            """
        )
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and MainGuardError.__name__ in result.stderr
    assert "job.py, line 3" in result.stderr and 'if __name__ == "__main__":' in result.stderr
    assert not (tmp_path / "out").exists()


def test_two_onnx_workers_equal_the_onnx_encoder_in_input_order(texts, tmp_path):
    """The ONNX backend in worker processes: each loads the export cached beside the model, once."""
    import sbert

    folder = tmp_path / "minilm"
    shutil.copytree(sbert.load("default", device="cpu").path, folder, ignore=shutil.ignore_patterns("onnx"))
    expected = sbert.load(folder, device="cpu", backend="onnx").encode(texts[:128], batch_size=16)  # exports it
    out = tmp_path / "out"
    run = encode_to_shards(folder, texts[:128], out, processes=2, shard_size=48, batch_size=16, backend="onnx")
    assert (run.rows, run.shards, sorted(run.written)) == (128, 3, [0, 1, 2])
    np.testing.assert_allclose(load_vectors(out), expected, atol=1e-6, rtol=0)
    assert json.loads((out / "manifest.json").read_text())["settings"]["backend"] == "onnx"
