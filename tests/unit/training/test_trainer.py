"""The trainer on a tiny model: it learns, it is reproducible, and an interrupted run resumes exactly."""

from __future__ import annotations

import json
import os
import re

import pytest
import torch
from conftest import make_tiny_encoder

import sbert
from sbert.data.examples import LabeledPair, ScoredPair, Triplet
from sbert.errors import SbertError
from sbert.evaluation import STSEvaluator
from sbert.losses import CosineRegressionLoss, SoftmaxLoss, TripletLoss
from sbert.training import Objective, TrainConfig, Trainer

pytestmark = pytest.mark.slow  # trains models

WORDS = [
    "the",
    "a",
    "man",
    "woman",
    "dog",
    "cat",
    "runs",
    "sleeps",
    "eats",
    "plays",
    "in",
    "on",
    "park",
    "house",
    "food",
    "ball",
    "quickly",
]


def scored_pairs(n: int) -> list[ScoredPair]:
    g = torch.Generator().manual_seed(1)
    pick = lambda k: " ".join(WORDS[i] for i in torch.randint(len(WORDS), (k,), generator=g).tolist())  # noqa: E731
    return [ScoredPair(pick(4), pick(5), float(i % 6)) for i in range(n)]


def labeled_pairs(n: int) -> list[LabeledPair]:
    return [LabeledPair(p.sentence1, p.sentence2, i % 3) for i, p in enumerate(scored_pairs(n))]


def params(encoder) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in encoder.state_dict().items()}


def regression_trainer(tmp_path, encoder, **overrides) -> Trainer:
    config = TrainConfig(batch_size=4, lr=1e-3, epochs=2, progress=False, **overrides)
    return Trainer(encoder, [Objective(scored_pairs(24), CosineRegressionLoss(), "sts")], config, tmp_path / "m")


def test_transformer_parameters_change_after_one_step(tmp_path, tiny_encoder):
    before = params(tiny_encoder)
    regression_trainer(tmp_path, tiny_encoder, max_steps=1, warmup=0.0).train()
    after = params(tiny_encoder)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert any(k.startswith("0.model.encoder.layer.0") for k in changed)
    assert any("word_embeddings" in k for k in changed)


def test_a_second_run_into_the_same_folder_is_refused_and_loses_nothing(tmp_path, tiny_encoder):
    from sbert.locks import hold_lock
    from sbert.training.trainer import LOCK, stopped_run

    trainer = regression_trainer(tmp_path, tiny_encoder, max_steps=1, warmup=0.0)
    trainer.run_dir.mkdir(parents=True)
    (trainer.run_dir / "log.jsonl").write_text('{"step": 1}\n')  # the first run's log so far
    with hold_lock(trainer.run_dir / LOCK, 0, RuntimeError), pytest.raises(SbertError) as err:
        trainer.train()  # the first run holds the folder
    assert f"another run (process {os.getpid()}) is training into this folder" in str(err.value)
    assert (trainer.run_dir / "log.jsonl").read_text() == '{"step": 1}\n'
    assert not trainer.out.exists()
    (trainer.run_dir / "log.jsonl").unlink()
    assert not stopped_run(trainer.run_dir)  # the lock file alone is no run to go on from
    trainer.train()  # let go: the next run trains
    assert trainer.out.is_dir()


def test_same_seed_same_losses(tmp_path):
    def losses(folder):
        regression_trainer(folder, make_tiny_encoder(), max_steps=6).train()
        rows = [json.loads(line) for line in (folder / "m.train" / "log.jsonl").read_text().splitlines()]
        return [r["loss"] for r in rows if "loss" in r]

    first, second = losses(tmp_path / "a"), losses(tmp_path / "b")
    assert len(first) == 6 and first == second


def test_resume_gives_the_same_weights_as_an_uninterrupted_run(tmp_path):
    straight = make_tiny_encoder()
    regression_trainer(tmp_path / "straight", straight, checkpoint_every=4).train()

    class Crash(Exception):
        pass

    def crash_at_5(step, loss):
        if step == 5:
            raise Crash

    interrupted = make_tiny_encoder()
    with pytest.raises(Crash):
        regression_trainer(tmp_path / "resumed", interrupted, checkpoint_every=4).train(on_step=crash_at_5)
    fresh = make_tiny_encoder(seed=123)  # other starting weights: all must come from the checkpoint
    summary = regression_trainer(tmp_path / "resumed", fresh, checkpoint_every=4).train(resume=True)
    assert summary["steps_run"] == 12 - 4
    for key, value in params(straight).items():
        torch.testing.assert_close(params(fresh)[key], value, rtol=0, atol=1e-6, msg=key)
    rows = [json.loads(x) for x in (tmp_path / "resumed" / "m.train" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == list(range(1, 13))  # no step logged twice


def test_resume_with_other_settings_is_refused(tmp_path):
    regression_trainer(tmp_path, make_tiny_encoder(), max_steps=3, keep_checkpoint=True).train()
    with pytest.raises(SbertError, match=r"checkpoint was made with other settings.*batch_size"):
        Trainer(
            make_tiny_encoder(),
            [Objective(scored_pairs(24), CosineRegressionLoss(), "sts")],
            TrainConfig(batch_size=8, lr=1e-3, epochs=2, max_steps=3, progress=False),
            tmp_path / "m",
        ).train(resume=True)


def test_round_robin_over_objectives_covers_each_dataset_once_per_epoch(tmp_path, tiny_encoder):
    objectives = [
        Objective(scored_pairs(10), CosineRegressionLoss(), "sts"),
        Objective(labeled_pairs(4), SoftmaxLoss(16), "nli"),
        Objective([Triplet("a man", "the man", "a cat")] * 6, TripletLoss(), "triplets"),
    ]
    trainer = Trainer(tiny_encoder, objectives, TrainConfig(batch_size=4, progress=False), tmp_path / "m")
    plan = trainer.epoch_plan(0)
    assert [task for task, _ in plan] == [0, 1, 2, 0, 2, 0]
    for task, objective in enumerate(objectives):
        rows = sorted(r for t, batch in plan if t == task for r in batch.tolist())
        assert rows == list(range(len(objective.examples)))
    assert trainer.epoch_plan(1)[0][1].tolist() != plan[0][1].tolist()  # reshuffled each epoch
    summary = trainer.train()
    assert summary["steps"] == 6 and sbert.load(tmp_path / "m", device="cpu").dim == 16


def test_warmup_then_linear_decay(tmp_path, tiny_encoder):
    regression_trainer(tmp_path, tiny_encoder, warmup=0.25).train()  # 12 steps, 3 of warm-up
    rows = [json.loads(x) for x in (tmp_path / "m.train" / "log.jsonl").read_text().splitlines()]
    lrs = [r["lr"] for r in rows if "lr" in r]  # the rate after each step
    expected = [1e-3 * f for f in (1 / 3, 2 / 3, 1.0, 8 / 9, 7 / 9, 6 / 9, 5 / 9, 4 / 9, 3 / 9, 2 / 9, 1 / 9, 0.0)]
    assert lrs == pytest.approx(expected)


def test_dev_evaluation_keeps_the_best_model(tmp_path, tiny_encoder):
    evaluator = STSEvaluator(scored_pairs(12), name="dev")
    trainer = regression_trainer(tmp_path, tiny_encoder, eval_every=3)
    trainer.evaluator = evaluator
    summary = trainer.train()
    rows = [json.loads(x) for x in (tmp_path / "m.train" / "log.jsonl").read_text().splitlines()]
    scores = [r["dev"]["spearman_cosine"] for r in rows if "dev" in r]
    assert len(scores) == 4 and summary["best_score"] == max(scores)
    saved = sbert.load(tmp_path / "m", device="cpu")
    assert evaluator(saved)["spearman_cosine"] == pytest.approx(max(scores), abs=1e-4)


def test_dev_evaluation_shows_its_progress_under_the_training_bar(tmp_path, tiny_encoder, capsys, monkeypatch):
    from sbert import progress

    monkeypatch.setattr(progress, "_on_terminal", lambda: True)  # tqdm bars, as on a terminal
    trainer = regression_trainer(tmp_path, tiny_encoder, max_steps=2, eval_every=1)
    trainer.config.progress = True
    trainer.evaluator = STSEvaluator(scored_pairs(12), name="dev")
    trainer.train()
    err = capsys.readouterr().err
    assert "train: dev evaluation at step 1" in err and "train: dev evaluation at step 2" in err
    assert "encode: 100%" in err  # the evaluation's own bar moves: the training bar does not look hung

    monkeypatch.setattr(progress, "_on_terminal", lambda: False)  # standard error to a file: plain lines
    trainer = regression_trainer(tmp_path / "plain", make_tiny_encoder(), max_steps=2, eval_every=1)
    trainer.config.progress = True
    trainer.evaluator = STSEvaluator(scored_pairs(12), name="dev")
    trainer.train()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("train: 2 steps x batch ") and "\r" not in "".join(lines)
    at = lines.index("train: dev evaluation at step 1")
    assert re.match(r"encode: \d+/\d+ texts in \d+s", lines[at + 1]), lines  # the evaluation's own progress
    assert "train: dev evaluation at step 2" in lines

    trainer = regression_trainer(tmp_path / "quiet", make_tiny_encoder(), max_steps=2, eval_every=1)
    trainer.evaluator = STSEvaluator(scored_pairs(12), name="dev")
    trainer.train()  # progress=False: nothing on standard error
    assert capsys.readouterr().err == ""


def test_an_evaluator_that_names_no_headline_metric_is_refused_before_training(tmp_path, tiny_encoder):
    def plain(model, show_progress=None):
        return {"score": 1.0}

    with pytest.raises(TypeError, match=r"names no headline metric: give it a primary_metric\(model\) method"):
        Trainer(
            tiny_encoder,
            [Objective(scored_pairs(4), CosineRegressionLoss(), "sts")],
            TrainConfig(progress=False),
            tmp_path / "m",
            evaluator=plain,
        )
    assert not (tmp_path / "m.train").exists()


def test_a_custom_evaluator_names_the_metric_the_best_model_is_kept_by(tmp_path, tiny_encoder):
    class Countdown:
        """Scores 3, 2, 1, ...: the first evaluation stays the best."""

        name = "countdown"

        def __init__(self) -> None:
            self.left = 3.0

        def primary_metric(self, model) -> str:
            return "left"

        def __call__(self, model) -> dict[str, float]:
            self.left -= 1
            return {"left": self.left, "other": -self.left}

    trainer = regression_trainer(tmp_path, tiny_encoder, max_steps=3, eval_every=1)
    trainer.evaluator = Countdown()
    summary = trainer.train()
    rows = [json.loads(x) for x in (tmp_path / "m.train" / "log.jsonl").read_text().splitlines()]
    assert [(r["primary"], r["best"]) for r in rows if "dev" in r] == [("left", True), ("left", False), ("left", False)]
    assert summary["best_score"] == 2.0 and summary["final_score"] == 0.0
