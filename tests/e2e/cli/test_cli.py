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
    # no temporary file left; the .meta.json beside the vectors says what produced them
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.npy", "emb.npy.meta.json", "in.txt"]
    meta = json.loads((tmp_path / "emb.npy.meta.json").read_text())
    assert meta["count"] == 2 and meta["dim"] == 384 and meta["normalized"] is False
    assert (meta["model"], meta["backend"], meta["precision"]) == ("all-MiniLM-L6-v2", "torch", "fp32")


def test_encode_refuses_an_unknown_output_extension(runner, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("a text\n")
    result = runner.invoke(main, ["encode", str(source), "--out", str(tmp_path / "emb.csv")])
    assert result.exit_code == 2 and "unknown extension '.csv'" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
    result = runner.invoke(main, ["encode", str(source), "--out", str(tmp_path / "emb.csv"), "--format", "jsonl"])
    assert result.exit_code == 0 and json.loads((tmp_path / "emb.csv").read_text())["text"] == "a text"


def test_encode_a_folder_says_it_is_a_folder(runner, tmp_path):
    result = runner.invoke(main, ["encode", str(tmp_path)])
    assert result.exit_code == 1 and f"{tmp_path}: is a folder" in result.output


def test_similarity_of_an_empty_text_names_it_in_cli_terms(runner):
    result = runner.invoke(main, ["similarity", "a cat", " "])
    assert result.exit_code == 2 and "text 2 is empty" in result.output and "allow_empty" not in result.output


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


def test_info_and_eval_take_the_model_as_argument_or_option(runner, tmp_path):
    by_option = runner.invoke(main, ["info", "--model", "default", "--device", "cpu", "--json"])
    by_argument = runner.invoke(main, ["info", "all-MiniLM-L6-v2", "--json"])
    assert by_option.exit_code == 0 and by_argument.exit_code == 0, by_option.output + by_argument.output
    assert json.loads(by_option.stdout)["dim"] == json.loads(by_argument.stdout)["dim"] == 384
    both = runner.invoke(main, ["eval", "default", "--model", str(tmp_path), "--tasks", "stsb"])
    assert both.exit_code == 2 and "two models given" in both.output


MODEL_COMMANDS = [
    "encode",
    "similarity",
    "train",
    "eval",
    "info",
    "search",
    "mine",
    "cluster",
    "serve",
    "index build",
    "index add",
]


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_every_command_that_runs_a_model_takes_the_same_model_options(command):
    cmd = main
    for part in command.split():
        cmd = cmd.commands[part]
    options = {opt for param in cmd.params for opt in getattr(param, "opts", [])}
    assert {"--model", "--device", "--allow-pickle"} <= options, f"sbert {command}: {sorted(options)}"


def test_top_level_help_lists_what_sbert_does(runner):
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("encode", "similarity", "train", "eval", "info", "index", "search", "mine", "cluster", "serve"):
        assert f"  {command}" in result.output
    assert "compare, train, evaluate, search, serve" in " ".join(result.output.split())
