"""``sbert train`` end to end on fixtures written here: options, a TOML run with two objectives, resume."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from conftest import make_tiny_encoder

import sbert
from sbert.cli import main
from sbert.errors import InputFileError
from sbert.training import Trainer
from sbert.training.recipe import objective_examples
from sbert.training.spec import ObjectiveSpec, load_run_file

pytestmark = pytest.mark.slow  # trains models

STSB = "\n".join(
    f"main-captions\tMSRvid\t2012test\t{i:04d}\t{i % 6}.0\tA man is playing number {i}.\tA person plays {i}."
    for i in range(24)
)
NLI = "\n".join(
    json.dumps(
        {
            "sentence1": f"A dog runs in field {i // 4}.",
            "sentence2": f"An animal moves {i}.",
            "gold_label": ["entailment", "neutral", "contradiction", "-"][i % 4],
        }
    )
    for i in range(16)
)


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "sts.csv").write_text(STSB + "\n")
    (tmp_path / "nli.jsonl").write_text(NLI + "\n")
    return tmp_path


def stsb_regression(files, out) -> list[str]:
    """``sbert train`` arguments for regression on the STSb fixture, batch 8, quiet."""
    return [
        "train",
        "--objective",
        "regression",
        "--train",
        str(files / "sts.csv"),
        "--format",
        "stsb",
        "--out",
        str(out),
        "--batch-size",
        "8",
        "--no-progress",
    ]


def test_train_regression_from_options_with_dev(files):
    out = files / "model"
    args = [
        *stsb_regression(files, out),
        "--dev",
        str(files / "sts.csv"),
        "--dev-format",
        "stsb",
        "--max-steps",
        "2",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "best dev" in result.output
    assert sbert.load(out, device="cpu").dim == 384
    log = [json.loads(x) for x in (files / "model.train" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2]


def test_train_from_a_toml_run_with_two_objectives_and_random_init(files):
    run = files / "run.toml"
    run.write_text(
        f"""
out = "{files / "multi"}"
init = "random"
pooling = "max"
[train]
batch_size = 4
max_steps = 4
progress = false
[[objectives]]
objective = "regression"
format = "stsb"
train = ["{files / "sts.csv"}"]
[[objectives]]
objective = "classification"
format = "nli"
train = ["{files / "nli.jsonl"}"]
concat = "u,v,|u-v|,u*v"
"""
    )
    spec = load_run_file(run)
    assert [o.objective for o in spec.objectives] == ["regression", "classification"]
    result = CliRunner().invoke(main, ["train", "--config", str(run)])
    assert result.exit_code == 0, result.output
    model = sbert.load(files / "multi", device="cpu")
    assert model.describe()["modules"][1] == "Pooling(dim=384, modes=['max'])"
    default = sbert.load("default", device="cpu")
    assert abs(model.encode("x") - default.encode("x")).max() > 0.01  # random start, not the default


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A 1-layer, 16-wide model folder: trains in milliseconds a step, its checkpoint is small."""
    folder = tmp_path_factory.mktemp("tiny") / "model"
    make_tiny_encoder().save(folder)
    return folder


def tiny_regression(files, tiny_model, out, steps: int) -> list[str]:
    """``sbert train`` arguments: regression on the STSb fixture with the tiny model, ``steps`` steps."""
    args = stsb_regression(files, out)
    return [
        *args[:1],
        "--model",
        str(tiny_model),
        *args[1:],
        "--epochs",
        "100",
        "--max-steps",
        str(steps),
        "--device",
        "cpu",
    ]


def log_rows(run_dir) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "log.jsonl").read_text().splitlines()]


def test_sigterm_saves_a_checkpoint_exits_143_and_resume_goes_on(files, tiny_model, monkeypatch):
    logged = Trainer._log

    def log_then_sigterm(self, row):  # SIGTERM arrives during step 2
        logged(self, row)
        if row.get("step") == 2 and "loss" in row:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(Trainer, "_log", log_then_sigterm)
    args = tiny_regression(files, tiny_model, files / "r", 3)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 143, result.output
    assert "training stopped by SIGTERM after step 2 of 3" in result.stderr
    assert f"checkpoint saved to {files / 'r.train' / 'checkpoint.pt'}" in result.stderr
    assert result.stderr.rstrip().endswith("--resume")
    monkeypatch.undo()

    result = CliRunner().invoke(main, [*args, "--resume", "--keep-checkpoint"])
    assert result.exit_code == 0, result.output
    assert [r["step"] for r in log_rows(files / "r.train") if "loss" in r] == [1, 2, 3]
    assert [r["summary"]["steps_run"] for r in log_rows(files / "r.train") if "summary" in r] == [1]
    assert f"checkpoint kept at {files / 'r.train' / 'checkpoint.pt'}" in result.stderr
    assert (files / "r.train" / "checkpoint.pt").is_file()


def _sbert() -> list[str]:
    script = shutil.which("sbert", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "sbert.cli"]


def test_ctrl_c_during_sbert_train_then_resume_gives_the_uninterrupted_weights(files, tiny_model):
    steps = 50
    straight = CliRunner().invoke(main, tiny_regression(files, tiny_model, files / "straight", steps))
    assert straight.exit_code == 0, straight.output

    command = [*_sbert(), *tiny_regression(files, tiny_model, files / "stopped", steps)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = files / "stopped.train" / "log.jsonl"
        deadline = time.monotonic() + 120
        while not (log.is_file() and '"loss"' in log.read_text()):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "no training step logged within 120 s"
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, f"finished before the SIGINT arrived? {stderr}"
    reached = int(re.search(rf"stopped by SIGINT after step (\d+) of {steps}", stderr)[1])
    assert 1 <= reached < steps and "Aborted!" not in stderr
    assert (files / "stopped.train" / "checkpoint.pt").is_file()
    resume = shlex.split(stderr.strip().splitlines()[-1])  # the command it prints, as written
    assert resume[:2] == ["sbert", "train"] and resume[-1] == "--resume"

    resumed = CliRunner().invoke(main, resume[1:])
    assert resumed.exit_code == 0, resumed.output
    assert "checkpoint removed (--keep-checkpoint keeps it)" in resumed.stderr
    assert not (files / "stopped.train" / "checkpoint.pt").exists()
    assert [r["step"] for r in log_rows(files / "stopped.train") if "loss" in r] == list(range(1, steps + 1))
    ours, theirs = sbert.load(files / "stopped", device="cpu"), sbert.load(files / "straight", device="cpu")
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)


def test_bad_train_arguments(files):
    result = CliRunner().invoke(main, ["train", "--objective", "regression", "--out", str(files / "x")])
    assert result.exit_code == 2 and "missing --train, --format" in result.output
    result = CliRunner().invoke(
        main,
        [
            "train",
            "--objective",
            "classification",
            "--train",
            str(files / "sts.csv"),
            "--format",
            "stsb",
            "--out",
            str(files / "x"),
        ],
    )
    assert result.exit_code == 1 and "objective 'classification' needs LabeledPair" in result.output
    (files / "bad.toml").write_text('out = "x"\nlearning_rate = 3\n')
    result = CliRunner().invoke(main, ["train", "--config", str(files / "bad.toml")])
    assert result.exit_code == 1 and "learning_rate" in result.output


def test_nli_becomes_triplets_for_triplet_objectives(files):
    triplets = objective_examples(ObjectiveSpec("triplet", "nli", [str(files / "nli.jsonl")]))
    assert triplets and all(t.anchor.startswith("A dog") for t in triplets)
    with pytest.raises(ValueError, match="expected one of"):
        ObjectiveSpec("regression", "csv", ["x"])


def test_in_batch_objectives_take_scored_pairs_only_above_a_stated_score(files):
    """mnrl takes every pair as a positive: STSb pairs scored 0 would train as positives without a word."""
    sts = [str(files / "sts.csv")]
    with pytest.raises(ValueError, match=r"gives pairs scored 0-5.*--positive-score, e.g. 4.*--objective regression"):
        ObjectiveSpec("mnrl", "stsb", sts)
    with pytest.raises(ValueError, match="format 'sick' gives pairs scored 1-5"):
        ObjectiveSpec("cached-mnrl", "sick", sts)
    kept = objective_examples(ObjectiveSpec("mnrl", "stsb", sts, {"positive_score": 4}))
    assert [p.score for p in kept] == [4.0, 5.0] * 4  # scores i % 6 for 24 rows: the 4s and 5s
    with pytest.raises(InputFileError, match=r"sts.csv: no pair scored at least positive_score 5.5 \(the highest: 5\)"):
        objective_examples(ObjectiveSpec("mnrl", "stsb", sts, {"positive_score": 5.5}))
    assert objective_examples(ObjectiveSpec("mnrl", "nli", [str(files / "nli.jsonl")]))  # NLI: triplets, no scores
    args = ["train", "--objective", "mnrl", "--format", "stsb", "--train", *sts, "--out", str(files / "m")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "--positive-score" in result.output and not (files / "m").exists()


def test_train_into_a_folder_of_other_files_is_refused_before_training(files, tiny_model):
    out = files / "mydocs"
    out.mkdir()
    (out / "thesis.txt").write_text("keep me")
    args = [*stsb_regression(files, out), "--model", str(tiny_model), "--max-steps", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "thesis.txt" in result.output and "no model" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["thesis.txt"]
    assert not (files / "mydocs.train").exists()  # refused before the first step


def test_a_model_with_truncate_dim_trains_on_its_full_width_and_keeps_the_setting(files, tmp_path):
    folder = tmp_path / "truncated"
    encoder = make_tiny_encoder()
    encoder.truncate_dim = 8
    encoder.save(folder)
    args = [
        "train",
        "--model",
        str(folder),
        "--objective",
        "classification",
        "--train",
        str(files / "nli.jsonl"),
        "--format",
        "nli",
        "--out",
        str(tmp_path / "out"),
        "--max-steps",
        "2",
        "--device",
        "cpu",
        "--no-progress",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    trained = sbert.load(tmp_path / "out", device="cpu")
    assert (trained.truncate_dim, trained.model_dim, trained.encode(["a dog"]).shape) == (8, 16, (1, 8))


def test_train_and_eval_choices_come_from_the_tables():
    from sbert.cli import evaluate, train
    from sbert.data.formats import FORMATS
    from sbert.evaluation.tasks import TASKS
    from sbert.losses.objectives import OBJECTIVES
    from sbert.losses.triplet import DISTANCES
    from sbert.modules.pooling import MODES

    choices = {p.name: tuple(p.type.choices) for p in train.params if hasattr(p.type, "choices")}
    assert choices["objective"] == tuple(OBJECTIVES) and choices["fmt"] == choices["dev_format"] == tuple(FORMATS)
    assert (choices["pooling"], choices["distance"]) == (MODES, tuple(DISTANCES))
    tasks_help = next(p.help for p in evaluate.params if p.name == "tasks")
    assert all(task in tasks_help for task in TASKS)
    code = "import sys, sbert.cli; print('torch' in sys.modules)"  # the tables that need torch load on use
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_options_override_a_run_file_and_cannot_add_an_objective_to_it(files, tiny_model):
    run = files / "run.toml"
    run.write_text(
        f'model = "{tiny_model}"\nout = "{files / "from-file"}"\n[train]\nbatch_size = 4\nmax_steps = 5\n'
        f'progress = false\n[[objectives]]\nobjective = "regression"\nformat = "stsb"\n'
        f'train = ["{files / "sts.csv"}"]\n'
    )
    out = files / "from-options"
    result = CliRunner().invoke(main, ["train", "--config", str(run), "--max-steps", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [r["step"] for r in log_rows(files / "from-options.train") if "loss" in r] == [1, 2]
    assert not (files / "from-file").exists()
    result = CliRunner().invoke(main, ["train", "--config", str(run), "--objective", "mnrl"])
    assert result.exit_code == 2 and "--objective, --format and --train describe one objective" in result.output


def test_every_objective_setting_is_a_train_option():
    """The loss options are made from OBJECTIVES' settings: each one is reachable, e.g. mnrl's scale."""
    from sbert.cli import train
    from sbert.losses.objectives import setting_defaults
    from sbert.training.spec import values_from_options

    names = {p.name for p in train.params}
    assert set(setting_defaults()) <= names
    args = ["--objective", "mnrl", "--scale", "7", "--margin", "0.5", "--mini-batch-size", "8", "--guide-margin", "1"]
    context = train.make_context("train", args)
    objective = values_from_options(context.params)["objectives"][0]
    assert objective == {"objective": "mnrl", "scale": 7.0, "margin": 0.5, "mini_batch_size": 8, "guide_margin": 1.0}
