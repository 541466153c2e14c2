"""Runs that write a model keep a good one safe: an existing model is replaced only with --overwrite (or
gone on from with --resume), NaN weights are never saved, links the user keeps in a model folder survive a
save over it, and wrong settings are refused with what is wrong, before any work."""

from __future__ import annotations

import json
import os
import random
import re

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import make_tiny_encoder
from torch import nn

from sbert.atomic import ModelExistsError, NonFiniteWeightsError, atomic_dir, check_model_target
from sbert.cli import main

WORDS = ["printer", "calc", "writer", "crash", "hang", "slow", "font", "table", "chart", "save", "load", "page"]


def _reports(path, count: int = 24, words: int = 30):
    """JSON lines of ``count`` reports, each a title and a body of ``words`` words."""
    rng = random.Random(0)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(count):
            row = {
                "_id": f"r{i}",
                "title": " ".join(rng.sample(WORDS, 3)),
                "text": " ".join(rng.choices(WORDS, k=words)),
            }
            handle.write(json.dumps(row) + "\n")
    return path


def _a_model_folder(path):
    """A folder that holds a model, as far as a command about to replace it can tell."""
    path.mkdir(parents=True)
    (path / "modules.json").write_text("[]")
    (path / "notes.txt").write_text("mine")
    return path


def _command(name: str, out, tmp_path) -> list[str]:
    """``name``'s command line writing to ``out``, its inputs missing (so that reading them fails)."""
    missing = str(tmp_path / "missing.jsonl")
    return {
        "adapt": ["adapt", "no-such-model", "--corpus", missing, "--out", str(out)],
        "train": ["train", "-m", "no-such-model", "--objective", "regression", "--format", "stsb", "--train", missing],
        "distill": ["distill", "no-such-model", "--out", str(out)],
        "rotate": ["rotate", "no-such-model", "--corpus", missing, "--out", str(out)],
    }[name] + (["--out", str(out)] if name == "train" else [])


@pytest.mark.parametrize("name", ["adapt", "train", "distill", "rotate"])
def test_an_existing_model_is_replaced_only_with_overwrite_and_refused_before_anything_is_read(tmp_path, name):
    out = _a_model_folder(tmp_path / "good")
    result = CliRunner().invoke(main, _command(name, out, tmp_path))
    assert result.exit_code == 1
    line = result.output.strip().splitlines()[-1]
    assert f"Error: {out}: a model is already there; use --overwrite to replace it" in line, result.output
    assert ("use --resume to go on with a run that was stopped" in line) == (name in ("adapt", "train"))
    assert sorted(p.name for p in out.iterdir()) == ["modules.json", "notes.txt"]  # untouched
    again = CliRunner().invoke(main, [*_command(name, out, tmp_path), "--overwrite"])
    assert again.exit_code != 0 and "a model is already there" not in again.output  # on to the missing input


def test_resume_over_an_existing_model_needs_a_stopped_run_to_go_on_from(tmp_path):
    out = _a_model_folder(tmp_path / "good")
    run_dir = tmp_path / "good.train"
    resume = [*_command("adapt", out, tmp_path), "--resume"]
    result = CliRunner().invoke(main, resume)
    assert f"{run_dir} holds no stopped run to resume; use --overwrite to train afresh over it" in result.output
    run_dir.mkdir()
    (run_dir / "log.jsonl").write_text('{"step": 1, "loss": 0.5}\n{"summary": {"steps": 1}}\n')
    result = CliRunner().invoke(main, resume)
    assert f"the run in {run_dir} finished, leaving nothing to resume" in result.output
    (run_dir / "checkpoint.pt").write_bytes(b"")  # a run stopped after a step: the check lets it go on
    result = CliRunner().invoke(main, resume)
    assert result.exit_code == 1 and "missing.jsonl: no such file" in result.output, result.output


def test_the_python_check_names_the_arguments(tmp_path):
    out = _a_model_folder(tmp_path / "good")
    with pytest.raises(ModelExistsError, match=r"a model is already there; pass overwrite=True \(--overwrite\)"):
        check_model_target(out)
    check_model_target(out, overwrite=True)
    check_model_target(tmp_path / "new")


def test_a_save_over_a_model_folder_keeps_links_to_folders_as_links(tmp_path):
    outside = tmp_path / "runs"  # the user's folder elsewhere, linked from the model folder
    (outside / "eval").mkdir(parents=True)
    (outside / "eval" / "scores.csv").write_text("1,2")
    target = _a_model_folder(tmp_path / "model")
    (target / "model.safetensors").write_text("OLD")
    os.symlink("../runs/eval", target / "eval")  # relative, to a folder
    os.symlink(outside, target / "runs")  # absolute, to a folder
    os.symlink("notes.txt", target / "notes-link.txt")  # to a file
    (target / "1_Pooling").mkdir()
    os.symlink(outside / "eval", target / "1_Pooling" / "kept")  # in a module's folder
    with atomic_dir(target) as tmp:
        (tmp / "modules.json").write_text("[]")
        (tmp / "model.safetensors").write_text("NEW")
    assert (target / "model.safetensors").read_text() == "NEW"
    for name, points_to in [
        ("eval", "../runs/eval"),
        ("runs", str(outside)),
        ("notes-link.txt", "notes.txt"),
        ("1_Pooling/kept", str(outside / "eval")),
    ]:
        assert (target / name).is_symlink() and os.readlink(target / name) == points_to, name
    assert (target / "eval" / "scores.csv").read_text() == "1,2"  # reached through the link, as before
    assert sorted(p.name for p in outside.rglob("*")) == ["eval", "scores.csv"]  # nothing written through it
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".model.")]


def test_adapt_refuses_a_hold_out_that_leaves_nothing_to_train_on_with_the_counts(tmp_path):
    corpus = _reports(tmp_path / "reports.jsonl", count=24)
    args = ["adapt", "no-such-model", "--corpus", str(corpus), "--out", str(tmp_path / "o"), "--hold-out", "100"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    found = re.search(
        r"reports\.jsonl: adapt needs at least 2 distinct documents to train on and the hold-out leaves (\d+); "
        r"with --hold-out 100, (\d+) of the 24 documents are held out and (\d+) left to train on: hold out fewer",
        result.output,
    )
    assert found and int(found[1]) < 2 and int(found[2]) + int(found[3]) == 24, result.output
    assert "title" not in result.output  # not "no document has both a title and a text"


def test_adapt_refuses_a_single_document_saying_how_many_it_needs(tmp_path):
    corpus = _reports(tmp_path / "one.jsonl", count=1)
    result = CliRunner().invoke(main, ["adapt", "no-such-model", "--corpus", str(corpus), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "one.jsonl: 1 document (1 distinct); adapt needs at least 2 distinct documents" in result.output
    twice = tmp_path / "twice.jsonl"
    row = corpus.read_text()
    twice.write_text(row + row.replace('"r0"', '"r1"'))  # two ids, one text
    result = CliRunner().invoke(main, ["adapt", "no-such-model", "--corpus", str(twice), "--out", str(tmp_path / "o")])
    assert "twice.jsonl: 2 documents (1 distinct); adapt needs at least 2 distinct documents" in result.output


def test_distill_refuses_a_negative_dim_at_once(tmp_path):
    result = CliRunner().invoke(main, ["distill", "no-such-model", "--out", str(tmp_path / "s"), "--dim", "-1"])
    assert result.exit_code == 2 and "--dim" in result.output


@pytest.mark.slow
def test_distill_refuses_a_dim_above_the_width_before_running_any_token(tmp_path, monkeypatch):
    import sbert.static.distill

    base = make_tiny_encoder().save(tmp_path / "tiny")

    def no_tokens(*args, **kwargs):
        raise AssertionError("ran the tokens before checking --dim")

    monkeypatch.setattr(sbert.static.distill, "token_vectors", no_tokens)
    result = CliRunner().invoke(main, ["distill", str(base), "--out", str(tmp_path / "s"), "--dim", "999"])
    assert result.exit_code == 1
    assert "dim 999: a static model distilled from this one keeps from 1 to 16 dimensions" in result.output
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_non_finite_weights_are_never_saved_over_a_good_model(tmp_path):
    import sbert

    good = make_tiny_encoder().save(tmp_path / "good")
    before = sbert.load(good, device="cpu").encode(["printer crash"])
    broken = sbert.load(good, device="cpu")
    with torch.no_grad():
        next(broken.parameters())[0, :3] = float("nan")
    with pytest.raises(NonFiniteWeightsError, match=r"good: refusing to save a model whose weights hold 3 NaN"):
        broken.save(good)
    np.testing.assert_array_equal(sbert.load(good, device="cpu").encode(["printer crash"]), before)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".good.")]  # no half-written version
    with pytest.raises(NonFiniteWeightsError, match="nothing was written"):
        broken.save(tmp_path / "new")
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("steps", "message"), [("2", "refusing to save a model"), ("4", "training diverged")])
def test_a_diverged_adapt_keeps_the_good_model(tmp_path, steps, message):
    """The report's command: ``sbert adapt ... --out good --lr 1e308``: after one step the weights are NaN
    (refused at the save), after two the loss too (the run stops there)."""
    import sbert

    base = make_tiny_encoder().save(tmp_path / "base")
    corpus = _reports(tmp_path / "titled.jsonl")
    good = tmp_path / "good"
    args = ["adapt", str(base), "--corpus", str(corpus), "--out", str(good), "--batch-size", "4", "--device", "cpu"]
    assert CliRunner().invoke(main, [*args, "--steps", "1"]).exit_code == 0
    before = sbert.load(good, device="cpu").encode(["printer crash"])
    result = CliRunner().invoke(main, [*args, "--steps", steps, "--lr", "1e308", "--overwrite"])
    assert result.exit_code == 1 and message in result.output, result.output
    assert "model saved to" not in result.output
    np.testing.assert_array_equal(sbert.load(good, device="cpu").encode(["printer crash"]), before)


class _NaNAfter(nn.Module):
    """A loss that is finite for ``steps`` steps, then NaN."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps, self.calls = steps, 0

    def forward(self, model, batch):
        self.calls += 1
        (vectors,) = model.embed_with_grad([t for t, _ in batch])
        loss = vectors.pow(2).mean()
        return loss if self.calls <= self.steps else loss * float("nan")


@pytest.mark.slow
def test_the_trainer_stops_at_a_non_finite_loss_and_saves_nothing(tmp_path):
    from sbert.training import Objective, TrainConfig, Trainer
    from sbert.training.trainer import TrainingDiverged

    examples = [(w, w) for w in WORDS]
    config = TrainConfig(batch_size=4, max_steps=3, progress=False, lr=1e-3)
    trainer = Trainer(make_tiny_encoder(), [Objective(examples, _NaNAfter(1))], config, tmp_path / "m", device="cpu")
    with pytest.raises(TrainingDiverged, match=r"loss is nan at step 2 of 3 .*without saving the diverged"):
        trainer.train()
    assert not (tmp_path / "m").exists()
    rows = [json.loads(line) for line in (tmp_path / "m.train" / "log.jsonl").read_text().splitlines()]
    assert rows[-1] == {"step": 2, "objective": "objective", "diverged": "nan"}
