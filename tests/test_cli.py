"""The sbert command, run in-process through click's runner."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.cli import main


@pytest.fixture(scope="module")
def runner(model):  # the model fixture warms the file cache; each command loads the model itself
    return CliRunner()


def test_encode_file_to_npy_matches_library(runner, model, tmp_path):
    source = tmp_path / "in.txt"
    source.write_bytes("first sentence\r\nsecond one, café\n".encode())
    out = tmp_path / "emb.npy"
    result = runner.invoke(main, ["encode", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(out), model.encode(["first sentence", "second one, café"]), atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.npy", "in.txt"]  # no temporary file left


def test_encode_stdin_to_jsonl(runner, model):
    result = runner.invoke(main, ["encode", "-", "--normalize"], input="hello world\n")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout.splitlines()[0])
    assert row["text"] == "hello world" and len(row["embedding"]) == 384
    np.testing.assert_allclose(row["embedding"], model.encode("hello world", normalize=True), atol=1e-6)


def test_encode_rejects_non_utf8_with_file_and_line(runner, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("fine\ncaf\xe9 au lait\n".encode("latin-1"))
    result = runner.invoke(main, ["encode", str(bad), "--out", str(tmp_path / "x.npy")])
    assert result.exit_code == 1
    assert f"{bad}: line 2 is not valid UTF-8" in result.output
    assert not (tmp_path / "x.npy").exists()


def test_encode_empty_line_error_and_skip(runner, tmp_path):
    src = tmp_path / "gaps.txt"
    src.write_text("a\n\nb\n")
    result = runner.invoke(main, ["encode", str(src), "--out", str(tmp_path / "x.npy")])
    assert result.exit_code == 1 and "line 2 is empty" in result.output
    result = runner.invoke(main, ["encode", str(src), "--out", str(tmp_path / "x.npy"), "--skip-empty"])
    assert result.exit_code == 0 and np.load(tmp_path / "x.npy").shape == (2, 384)


def test_encode_npy_needs_out(runner):
    result = runner.invoke(main, ["encode", "--format", "npy"], input="x\n")
    assert result.exit_code == 2 and "--format npy needs --out" in result.output


def test_similarity_prints_matrix(runner, model):
    texts = ["A man is eating food.", "A man eats something.", "The sky is blue."]
    result = runner.invoke(main, ["similarity", *texts, "--json"])
    assert result.exit_code == 0, result.output
    matrix = np.array(json.loads(result.stdout)["matrix"])
    emb = model.encode(texts)
    np.testing.assert_allclose(matrix, emb @ emb.T, atol=1e-5)
    table = runner.invoke(main, ["similarity", *texts]).stdout
    assert "[1] A man is eating food." in table and f"{matrix[0, 1]:9.4f}" in table


def test_info(runner):
    result = runner.invoke(main, ["info", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["dim"] == 384 and info["max_seq_length"] == 256
    assert [m.split("(")[0] for m in info["modules"]] == ["Transformer", "Pooling", "Normalize"]


def test_missing_model_is_a_clean_error(runner, tmp_path):
    result = runner.invoke(main, ["info", str(tmp_path / "none")])
    assert result.exit_code == 1 and "no such model folder" in result.output
    assert "Traceback" not in result.output
