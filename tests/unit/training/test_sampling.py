"""The no-duplicates batch sampler: no batch holds a text twice, every row once an epoch, the order a
function of the seed, the moved rows counted; and the trainer using it for in-batch objectives."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from sbert.data.examples import RetrievalExample, ScoredPair
from sbert.losses import CosineRegressionLoss, MultipleNegativesRankingLoss
from sbert.training import Objective, TrainConfig, Trainer
from sbert.training.sampling import epoch_batches, example_texts, no_duplicate_batches

# Bug reports: dup1..dup3 all duplicate one master report; the others are pairs of their own.
MASTER_ROWS = [RetrievalExample(f"dup{i}", "master") for i in range(1, 4)]
OTHER_ROWS = [RetrievalExample(f"report {i}", f"original {i}") for i in range(9)]
ROWS = MASTER_ROWS + OTHER_ROWS


def texts_of(rows):
    return lambda r: example_texts(rows[r])


def assert_no_text_twice(batches, rows) -> None:
    for batch in batches:
        texts = [t for r in batch.tolist() for t in set(example_texts(rows[r]))]
        assert len(texts) == len(set(texts)), f"batch {batch.tolist()} holds a text twice"


def test_rows_sharing_a_master_land_in_different_batches():
    cut = no_duplicate_batches(range(len(ROWS)), texts_of(ROWS), batch_size=4)
    assert_no_text_twice(cut.batches, ROWS)
    where = {r: i for i, batch in enumerate(cut.batches) for r in batch.tolist()}
    assert len({where[0], where[1], where[2]}) == 3  # (dup1, master), (dup2, master), (dup3, master)
    assert sorted(where) == list(range(len(ROWS)))  # every row once
    # order 0..11: batch 0 takes row 0 and rows 3, 4, 5; rows 1 and 2 wait and open the next batches
    assert [b.tolist() for b in cut.batches] == [[0, 3, 4, 5], [1, 6, 7, 8], [2, 9, 10, 11]]
    assert cut.moved == 2


def test_without_shared_texts_the_batches_are_the_plain_cut():
    cut = no_duplicate_batches([5, 3, 8, 0, 1, 2, 4, 6, 7], texts_of(OTHER_ROWS), batch_size=4)
    assert [b.tolist() for b in cut.batches] == [[5, 3, 8, 0], [1, 2, 4, 6], [7]]
    assert cut.moved == 0


def test_rows_that_fit_nowhere_get_batches_of_their_own():
    rows = [RetrievalExample(f"q{i}", "same") for i in range(3)]
    cut = no_duplicate_batches(range(3), texts_of(rows), batch_size=8)
    assert [b.tolist() for b in cut.batches] == [[0], [1], [2]]
    assert cut.moved == 2


def test_a_hard_negative_counts_as_a_text_of_its_row():
    rows = [RetrievalExample("q1", "p1", ("p2",)), RetrievalExample("q2", "p2"), RetrievalExample("q3", "p3")]
    cut = no_duplicate_batches(range(3), texts_of(rows), batch_size=3)
    assert [b.tolist() for b in cut.batches] == [[0, 2], [1]]


def test_bad_batch_size_and_bad_rows_are_refused():
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        no_duplicate_batches([0], texts_of(ROWS), 0)
    with pytest.raises(TypeError, match="expected a training example record, got str"):
        example_texts("dup1")


def plan_trainer(tmp_path, loss, rows=ROWS, **config) -> Trainer:
    settings = {"batch_size": 4, "epochs": 2, "progress": False, "seed": 7, **config}
    return Trainer(None, [Objective(rows, loss, "dups")], TrainConfig(**settings), tmp_path / "m")


def test_the_trainer_plans_in_batch_objectives_without_duplicates(tmp_path):
    rows = MASTER_ROWS * 2 + OTHER_ROWS  # each (dup, master) pair twice: 6 rows hold "master"
    trainer = plan_trainer(tmp_path, MultipleNegativesRankingLoss(), rows)
    plans = [trainer.epoch_plan(epoch) for epoch in (0, 1)]
    for plan in plans:
        batches = [batch for _, batch in plan]
        assert_no_text_twice(batches, rows)
        assert sorted(r for b in batches for r in b.tolist()) == list(range(len(rows)))
    assert len(plans[0]) >= 6 and trainer.total_steps == len(plans[0]) + len(plans[1])
    again = plan_trainer(tmp_path, MultipleNegativesRankingLoss(), rows)
    assert [b.tolist() for _, b in again.epoch_plan(1)] == [b.tolist() for _, b in plans[1]]  # same seed
    other = plan_trainer(tmp_path, MultipleNegativesRankingLoss(), rows, seed=8)
    assert [b.tolist() for _, b in other.epoch_plan(0)] != [b.tolist() for _, b in plans[0]]
    assert trainer.moved[0, 0] > 0


def test_the_sampler_can_be_turned_off_and_leaves_other_losses_alone(tmp_path):
    off = plan_trainer(tmp_path, MultipleNegativesRankingLoss(), no_duplicates=False)
    batches = [b for _, b in off.epoch_plan(0)]
    assert len(batches) == 3 and off.moved[0, 0] == 0
    order = np.random.default_rng([7, 0, 0]).permutation(len(ROWS))
    assert [b.tolist() for b in batches] == [order[i : i + 4].tolist() for i in (0, 4, 8)]  # the plain cut
    pairs = [ScoredPair(r.query, r.positive, 1.0) for r in ROWS]
    regression = plan_trainer(tmp_path, CosineRegressionLoss(), pairs)
    assert [b.tolist() for _, b in regression.epoch_plan(0)] == [b.tolist() for b in batches]
    assert "no_duplicates" in off.fingerprint()


def test_training_logs_how_many_rows_the_sampler_moved(tmp_path, tiny_encoder, caplog):
    trainer = Trainer(
        tiny_encoder,
        [Objective(ROWS, MultipleNegativesRankingLoss(), "dups")],
        TrainConfig(batch_size=4, epochs=2, progress=False, checkpoint_every=None),
        tmp_path / "m",
    )
    with caplog.at_level(logging.INFO, logger="sbert.training"):
        trainer.train(handle_signals=False)
    log = [json.loads(line) for line in (tmp_path / "m.train" / "log.jsonl").read_text().splitlines()]
    moved = [row for row in log if "sampler_moved" in row]
    assert [(row["epoch"], row["sampler_moved"]) for row in moved] == [
        (0, trainer.moved[0, 0]),
        (1, trainer.moved[1, 0]),
    ]
    assert moved[1]["step"] == trainer.epoch_steps(0) + 1
    assert "rows moved to keep texts out of batches holding them" in caplog.text


def test_a_resumed_run_takes_the_batches_the_interrupted_one_would_have(tmp_path):
    from conftest import make_tiny_encoder

    def trainer(folder, encoder):
        config = TrainConfig(batch_size=4, epochs=2, progress=False, checkpoint_every=4, lr=1e-3)
        return Trainer(encoder, [Objective(ROWS, MultipleNegativesRankingLoss(), "dups")], config, folder / "m")

    straight = trainer(tmp_path / "a", make_tiny_encoder())
    straight.train(handle_signals=False)
    assert straight.total_steps == 6  # 3 batches an epoch: the master rows need 3

    class Crash(Exception):
        pass

    def crash(step, loss):
        if step == 5:
            raise Crash

    with pytest.raises(Crash):
        trainer(tmp_path / "b", make_tiny_encoder()).train(on_step=crash, handle_signals=False)
    resumed = trainer(tmp_path / "b", make_tiny_encoder(seed=5))
    assert resumed.train(resume=True, handle_signals=False)["steps_run"] == 2

    def rows(folder):
        return [json.loads(x) for x in (folder / "m.train" / "log.jsonl").read_text().splitlines()]

    def losses(folder):
        return [r["loss"] for r in rows(folder) if "loss" in r]

    assert [r["step"] for r in rows(tmp_path / "b") if "loss" in r] == list(range(1, 7))
    assert losses(tmp_path / "b") == pytest.approx(losses(tmp_path / "a"), abs=1e-5)
    assert [r["step"] for r in rows(tmp_path / "b") if "sampler_moved" in r] == [1, 4]  # each epoch logged once


def test_the_command_line_option_reaches_the_config():
    from click.testing import CliRunner

    from sbert.cli import main
    from sbert.training.spec import run_spec, values_from_options

    values = values_from_options({"objective": "mnrl", "format": "ntuples", "out": "m", "no_duplicates": False}, ["x"])
    assert run_spec(values).config.no_duplicates is False
    assert run_spec(
        values_from_options({"objective": "mnrl", "format": "ntuples", "out": "m"}, ["x"])
    ).config.no_duplicates
    assert "--allow-duplicates" in CliRunner().invoke(main, ["train", "--help"]).output


def test_epoch_batches_are_the_trainers_batches(tmp_path):
    """benchmarks/guide_masking.py cuts the trainer's batches with ``epoch_batches``: the same rows, in order."""
    rows = MASTER_ROWS * 2 + OTHER_ROWS
    for no_duplicates in (True, False):
        trainer = plan_trainer(tmp_path, MultipleNegativesRankingLoss(), rows, no_duplicates=no_duplicates)
        for epoch in (0, 1):
            cut = epoch_batches(rows, 4, (7, epoch, 0), no_duplicates=no_duplicates)
            assert [b.tolist() for b in cut.batches] == [b.tolist() for _, b in trainer.epoch_plan(epoch)]
            assert cut.moved == trainer.moved[epoch, 0]
    unshuffled = epoch_batches(rows, 4, (7, 0, 0), shuffle=False, no_duplicates=False)
    assert [b.tolist() for b in unshuffled.batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14]]
