"""What a new user trips over: corpus formats by extension, one-line device errors, errors in the words of the
command line, plain tables, empty results that say which option to change, Ctrl-C that says what was kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.cli import main
from sbert.data.corpus import Columns, Corpus, read_corpus
from sbert.device import DeviceError, resolve_device
from sbert.errors import InputFileError

TWELVE = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "The stock market fell today.",
    "A cat sleeps on the sofa.",
    "Heavy rain is expected tomorrow.",
    "The night train to Vienna was delayed.",
    "Python is a popular programming language.",
    "The football match ended in a draw.",
    "The astronauts landed on the moon.",
    "Tomatoes grow best in a sunny garden.",
    "She has practised the violin since she was six.",
    "Boil the pasta in salted water.",
]


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


# -- corpus formats ------------------------------------------------------------------------------------
def test_a_csv_corpus_is_read_by_its_header_not_as_lines(tmp_path):
    path = tmp_path / "docs.csv"
    path.write_text('id,title,text\nd1,Cats,"Cats purr, softly."\nd2,,"Dogs bark\nat night."\n', encoding="utf-8")
    corpus = read_corpus(path)
    assert corpus == Corpus(["Cats purr, softly.", "Dogs bark\nat night."], ["d1", "d2"], ["Cats", None])
    assert corpus.joined() == ["Cats Cats purr, softly.", "Dogs bark\nat night."]
    tsv = tmp_path / "docs.tsv"
    tsv.write_text("key\tbody\tlabel\nk1\tfirst text\tx\nk2\tsecond text\ty\n", encoding="utf-8")
    named = Columns(text="body", id="key")
    assert read_corpus(tsv, columns=named) == Corpus(["first text", "second text"], ["k1", "k2"])
    assert read_corpus(tsv, columns=Columns(text="body")).ids is None  # no "id" column: no ids
    repeated = tmp_path / "export.csv"  # a tracker's export: one "Comment" column per comment
    repeated.write_text("id,Comment,Comment\n1,first,second\n2,,only the second\n3,only the first,\n")
    assert read_corpus(repeated, columns=Columns(text="Comment")).texts == [
        "first\nsecond",
        "only the second",
        "only the first",
    ]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.csv", "name,body\nx,y\n", r"a.csv: the header row \(line 1\) has no 'text' column \(columns: 'name'"),
        ("b.csv", "id,text\n1,one\n2,two,three\n", r"b.csv: line 3: 3 fields; the header row has 2"),
        ("c.csv", "id,text\n1,\n", r"c.csv: line 2: the 'text' column is empty"),
        ("d.json", '["a", "b"]\n', r"d.json: a '.json' file \(JSON, one document.*JSON lines \(.jsonl"),
        ("e.parquet", "PAR1", r"e.parquet: a '.parquet' file \(Parquet\) is not a format sbert reads"),
        ("f.xyz", "a\n", r"f.xyz: a '.xyz' file is not a format sbert reads texts from; expected text, one per line"),
    ],
)
def test_a_corpus_the_readers_do_not_understand_is_refused_naming_the_format(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputFileError, match=message):
        read_corpus(path)


def test_the_formats_table_is_what_readers_errors_and_help_texts_know(tmp_path, monkeypatch):
    from sbert.data import corpus as module
    from sbert.data.corpus import CORPUS_FORMATS, CorpusFormat, corpus_format, formats_help

    shown = formats_help()
    for fmt in CORPUS_FORMATS.values():
        assert f"{fmt.what} ({fmt.shown()})" in shown
    assert "JSON lines (.jsonl, .jsonl.gz)" in shown and "'-' = standard input" in shown
    for command in (["encode"], ["index", "build"], ["mine"], ["cluster"], ["plot", "map"]):
        assert " ".join(shown.split()) in " ".join(invoke(*command, "--help").output.split()), command
    added = CorpusFormat("ndjson", (".ndjson",), "newline-delimited JSON", module._jsonl_records)
    monkeypatch.setitem(CORPUS_FORMATS, "ndjson", added)  # a format is one entry (and its reader)
    path = tmp_path / "docs.ndjson.gz"
    import gzip

    path.write_bytes(gzip.compress(b'{"id": "a", "text": "one"}\n'))
    assert corpus_format(path) == "ndjson" and read_corpus(path) == Corpus(["one"], ["a"])
    with pytest.raises(InputFileError, match=r"newline-delimited JSON \(.ndjson, .ndjson.gz\)"):
        corpus_format(tmp_path / "x.xyz")


@pytest.mark.parametrize(
    "command",
    [
        ["encode", "{f}", "--out", "{tmp}/e.npy"],
        ["index", "build", "{f}", "--out", "{tmp}/ix"],
        ["mine", "{f}"],
        ["cluster", "{f}"],
        ["plot", "map", "{f}", "--out", "{tmp}/m.html"],
        ["plot", "heatmap", "--file", "{f}", "--out", "{tmp}/h.html"],
    ],
    ids=lambda c: " ".join(w for w in c if not w.startswith("{")),
)
def test_every_command_that_reads_texts_refuses_a_csv_without_its_column_in_cli_words(tmp_path, command):
    path = tmp_path / "texts.csv"
    path.write_text("sentence,score\nA man eats.,1\n", encoding="utf-8")
    result = invoke(*(w.format(f=path, tmp=tmp_path) for w in command))
    assert result.exit_code == 1, result.output
    assert "has no 'text' column (columns: 'sentence', 'score')" in result.output
    assert "use --text-column NAME for another" in result.output and "text_column" not in result.output


def test_a_repeated_id_is_refused_where_ids_name_texts_naming_both_lines(tmp_path):
    path = tmp_path / "docs.jsonl"
    rows = [{"_id": "a", "text": "one"}, {"_id": "b", "text": "two"}, {"_id": "a", "text": "three"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert read_corpus(path).ids == ["a", "b", "a"]  # encoding reads texts: allowed
    with pytest.raises(InputFileError, match=r"docs.jsonl: line 3: id 'a' was already given at line 1"):
        read_corpus(path, unique_ids=True)


@pytest.mark.parametrize(
    "command",
    [["index", "build", "{f}", "--out", "{tmp}/ix"], ["mine", "{f}"], ["cluster", "{f}"]],
    ids=lambda c: " ".join(w for w in c if not w.startswith("{")),
)
def test_commands_where_an_id_names_a_text_refuse_a_repeated_one_before_embedding(tmp_path, command, monkeypatch):
    path = tmp_path / "docs.csv"
    path.write_text("id,text\nd1,A man eats.\nd2,A cat sleeps.\nd1,Rain falls.\n", encoding="utf-8")
    for module in ("sbert.cli.indexing", "sbert.cli.searching"):
        monkeypatch.setattr(f"{module}.load_model", lambda *a, **k: pytest.fail("loaded a model first"))
    result = invoke(*(w.format(f=path, tmp=tmp_path) for w in command))
    assert result.exit_code == 1, result.output
    assert "docs.csv: line 4: id 'd1' was already given at line 2" in result.output
    assert not (tmp_path / "ix").exists()


def test_an_index_of_an_empty_corpus_is_refused(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    result = invoke("index", "build", path, "--out", tmp_path / "ix")
    assert result.exit_code == 1 and "empty.jsonl: no texts to index" in result.output
    assert not (tmp_path / "ix").exists()


def test_plot_retrieval_of_a_folder_that_is_not_there_says_so(tmp_path):
    pytest.importorskip("plotly")
    result = invoke("plot", "retrieval", tmp_path / "scifact", "--save-rankings", tmp_path / "r.json", "--out",
                    tmp_path / "r.html")  # fmt: skip
    assert result.exit_code == 2 and "scifact: no such folder or file" in result.output
    assert "exactly one" not in result.output


# -- devices -------------------------------------------------------------------------------------------
def test_a_device_this_machine_lacks_is_one_line_naming_the_devices_there_are():
    import torch

    assert resolve_device("cpu") == "cpu"
    unknown = r"device 'nonsense': not a device name torch knows; torch said: .+; this machine has: cpu"
    with pytest.raises(DeviceError, match=unknown):
        resolve_device("nonsense")
    absent = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU: absent everywhere
    with pytest.raises(DeviceError, match=rf"device '{absent}': not available here.*; this machine has: cpu"):
        resolve_device(absent)
    result = invoke("info", "--device", absent)
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and result.output.startswith(f"Error: device '{absent}'")


def test_a_device_torch_cannot_use_says_what_torch_said(monkeypatch):
    """A GPU that is there but full (or held) is not reported as absent: torch's reason is in the message."""
    import torch

    def full(*args, **kwargs):
        raise RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported")

    monkeypatch.setattr(torch, "empty", full)
    with pytest.raises(DeviceError) as caught:
        resolve_device("cpu")
    message = str(caught.value)
    assert message.startswith("device 'cpu': there, but torch could not use it (out of memory, or held by another")
    assert "; torch said: CUDA error: out of memory; this machine has: cpu" in message
    assert "\n" not in message and "asynchronously" not in message


# -- errors in CLI words, plain tables -----------------------------------------------------------------
def _tiny_index(tmp_path):
    from sbert.search.index.folder import VectorIndex

    vectors = np.random.default_rng(0).normal(size=(5, 8)).astype(np.float32)
    return VectorIndex.build(tmp_path / "ix", vectors, model="default", texts=[f"t{i}" for i in range(5)], ann=True)


def test_index_info_is_a_plain_table_and_json_on_request(tmp_path):
    _tiny_index(tmp_path)
    result = invoke("index", "info", tmp_path / "ix")
    assert result.exit_code == 0, result.output
    rows = {line[:16].strip(): line[16:] for line in result.output.splitlines()}
    assert (rows["rows"], rows["dimension"], rows["default method"]) == ("5", "8", "hnsw")
    assert "{" not in result.output and "structures" not in result.output
    assert "exact, hnsw (M 32, ef_construction 128, ef_search 64)" in result.output
    assert json.loads(invoke("index", "info", tmp_path / "ix", "--json").output)["structures"]["hnsw"]["M"] == 32


def test_library_advice_becomes_the_option_to_type(tmp_path):
    _tiny_index(tmp_path)
    corpus = tmp_path / "c.txt"
    corpus.write_text("one\n", encoding="utf-8")
    result = invoke("index", "build", corpus, "--out", tmp_path / "ix")
    assert result.exit_code == 1
    assert "use --overwrite" in result.output and "overwrite=True" not in result.output, result.output


def test_python_callers_keep_python_words(tmp_path):
    from sbert.errors import IndexExistsError
    from sbert.search.index.folder import VectorIndex

    _tiny_index(tmp_path)
    with pytest.raises(IndexExistsError, match=r"pass overwrite=True"):
        VectorIndex.build(tmp_path / "ix", np.ones((1, 8), np.float32), model="default")


# -- empty results say which option to change ----------------------------------------------------------
@pytest.fixture
def twelve(tmp_path, model):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(TWELVE) + "\n", encoding="utf-8")
    return path


def test_an_empty_clustering_names_the_option_to_change(twelve):
    result = invoke("cluster", twelve, "--method", "community", "--limit", "10")
    assert result.exit_code == 0, result.output
    assert "0 clusters; 12 texts in none" in result.output
    assert "hint: no group of at least --min-size 10 texts" in result.output and "lower --min-size" in result.output
    found = invoke("cluster", twelve, "--method", "community", "--min-size", "1", "--threshold", "0.2")
    assert "hint" not in found.output and "0 clusters" not in found.output


def test_mining_with_a_threshold_no_pair_reaches_says_the_best_score(twelve, model):
    result = invoke("mine", twelve, "--threshold", "0.8")
    assert result.exit_code == 0, result.output
    emb = model.encode(TWELVE, normalize=True)
    best = float((emb @ emb.T - 2 * np.eye(len(TWELVE))).max())
    assert "0 pairs" in result.output and "no pair reaches --threshold 0.8" in result.output
    assert f"the most similar pair scores {best:.4f}" in result.output or f"{best:.3f}" in result.output
    assert "hint" not in invoke("mine", twelve).output


def test_a_umap_map_of_a_dozen_texts_warns_on_the_terminal_and_the_figure(tmp_path):
    pytest.importorskip("umap")
    pytest.importorskip("plotly")
    from sbert.plot.maps import few_points_note

    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(TWELVE) + "\n", encoding="utf-8")
    # the warning comes before the model loads (here: a model that is not there, so no UMAP runs)
    result = invoke("plot", "map", path, "--out", tmp_path / "map.html", "--model", tmp_path / "no-model")
    assert "warning: 12 points: a UMAP map means little below ~50; --method pca" in result.output
    quiet = invoke("plot", "map", path, "--method", "pca", "--out", tmp_path / "m.html", "--model", tmp_path / "x")
    assert "warning" not in quiet.output
    assert "a UMAP map means little below ~50" in few_points_note("umap", 12)  # the figure's note
    assert few_points_note("umap", 50) == few_points_note("pca", 12) == ""


# -- warnings are lines of the command ------------------------------------------------------------------
@pytest.mark.slow
def test_a_warning_of_the_command_is_one_line_in_its_words(tmp_path):
    """``sbert encode`` of a text past the model's limit: the truncation warning is the command's own line,
    not Python's form (a path inside click and its source line). (-W and PYTHONWARNINGS filter before it shows.)"""
    source = tmp_path / "long.txt"
    source.write_text("a short text\n" + "word " * 400 + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "sbert", "encode", str(source), "--out", str(tmp_path / "v.npy")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    warning = "warning: 1 of 2 texts were longer than max_seq_length=256 tokens and were truncated"
    wrote = f"wrote 2 embeddings of dimension 384 to {tmp_path / 'v.npy'}"
    assert done.stderr.splitlines() == [warning, wrote], done.stderr


def test_the_warning_line_names_a_category_other_than_userwarning():
    import io

    from sbert.cli import show_warning

    out = io.StringIO()
    show_warning(UserWarning("12 points: few"), UserWarning, "/x/click/core.py", 911, out)
    show_warning(DeprecationWarning("old name"), DeprecationWarning, "/x/y.py", 1, out, "source")
    assert out.getvalue() == "warning: 12 points: few\nwarning (DeprecationWarning): old name\n"


# -- Ctrl-C ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_ctrl_c_in_index_build_says_nothing_was_written(tmp_path):
    corpus = tmp_path / "big.txt"
    corpus.write_text("".join(f"sentence number {i} about topic {i % 97}\n" for i in range(20_000)), encoding="utf-8")
    out = tmp_path / "ix"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "sbert", "index", "build", str(corpus), "--out", str(out), "--progress"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, env=env)
    deadline, seen = time.monotonic() + 120, b""
    while b"%" not in seen and time.monotonic() < deadline:  # the progress bar: encoding has begun
        seen += process.stderr.read1(4096) or b""
        assert process.poll() is None, seen.decode()
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=60)[1]
    said = (seen + rest).decode()
    assert process.returncode == 130, said
    assert f"interrupted: nothing was written: {out} is as it was" in said and "Traceback" not in said
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["big.txt"]
