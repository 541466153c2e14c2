"""``sbert train`` end to end on fixtures written here: options, a TOML run with two objectives, resume."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import sbert
from sbert.cli import main
from sbert.training.recipe import ObjectiveSpec, load_run_file, read_examples

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


def test_resume_continues_after_the_checkpoint(files):
    base = [*stsb_regression(files, files / "r"), "--checkpoint-every", "2"]
    assert CliRunner().invoke(main, [*base, "--max-steps", "3"]).exit_code == 0
    result = CliRunner().invoke(main, [*base, "--max-steps", "3", "--resume"])
    assert result.exit_code == 0, result.output
    log = [json.loads(x) for x in (files / "r.train" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3]
    assert [r["summary"]["steps_run"] for r in log if "summary" in r] == [1]


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
    triplets = read_examples("nli", files / "nli.jsonl", "triplet")
    assert triplets and all(t.anchor.startswith("A dog") for t in triplets)
    with pytest.raises(ValueError, match="expected one of"):
        ObjectiveSpec("regression", "csv", ["x"])
