"""Stopping a training run: SIGINT/SIGTERM save a checkpoint at the step reached and say how to resume;
a finished run removes its checkpoint (unless kept); leftovers of killed checkpoint writes are collected."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
import torch
from conftest import make_tiny_encoder
from test_trainer import params, regression_trainer

from sbert.errors import SbertError
from sbert.training import TrainingInterrupted

pytestmark = pytest.mark.slow  # trains in a child process and stops it


def signal_at(step: int, *signums: int):
    """An ``on_step`` callback that sends this process ``signums`` after ``step``."""

    def on_step(done: int, loss: float) -> None:
        if done == step:
            for signum in signums:
                os.kill(os.getpid(), signum)

    return on_step


def loss_steps(run_dir) -> list[int]:
    rows = [json.loads(x) for x in (run_dir / "log.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if "loss" in r]


def test_sigint_saves_a_checkpoint_at_the_step_boundary_and_resume_gives_the_same_weights(tmp_path):
    straight = make_tiny_encoder()
    regression_trainer(tmp_path / "straight", straight, max_steps=6).train()  # periodic checkpoints: every 500

    run_dir = tmp_path / "stopped" / "m.train"
    with pytest.raises(TrainingInterrupted) as caught:
        regression_trainer(tmp_path / "stopped", make_tiny_encoder(), max_steps=6).train(
            on_step=signal_at(3, signal.SIGINT)
        )
    stop = caught.value
    assert (stop.step, stop.total_steps, stop.exit_code) == (3, 6, 130)
    assert stop.checkpoint == run_dir / "checkpoint.pt" and stop.checkpoint.is_file()
    assert "SIGINT after step 3 of 6" in str(stop) and "--resume" in str(stop)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers put back
    assert not [p for p in run_dir.iterdir() if ".tmp-" in p.name]

    fresh = make_tiny_encoder(seed=123)  # other starting weights: all must come from the checkpoint
    summary = regression_trainer(tmp_path / "stopped", fresh, max_steps=6).train(resume=True)
    assert summary["steps_run"] == 6 - 3
    for key, value in params(straight).items():
        torch.testing.assert_close(params(fresh)[key], value, rtol=0, atol=1e-6, msg=key)
    assert loss_steps(run_dir) == list(range(1, 7))


def test_sigterm_exits_143_and_a_second_signal_stops_at_once(tmp_path):
    with pytest.raises(TrainingInterrupted) as caught:
        regression_trainer(tmp_path / "a", make_tiny_encoder(), max_steps=4).train(on_step=signal_at(2, signal.SIGTERM))
    assert caught.value.exit_code == 143 and caught.value.step == 2
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    with pytest.raises(KeyboardInterrupt) as caught:  # Ctrl-C twice: out at once, no checkpoint
        regression_trainer(tmp_path / "b", make_tiny_encoder(), max_steps=4).train(
            on_step=signal_at(2, signal.SIGINT, signal.SIGINT)
        )
    assert not isinstance(caught.value, TrainingInterrupted)
    assert not (tmp_path / "b" / "m.train" / "checkpoint.pt").exists()


def test_a_finished_run_removes_its_checkpoint_unless_kept(tmp_path):
    summary = regression_trainer(tmp_path / "a", make_tiny_encoder(), checkpoint_every=2, max_steps=3).train()
    assert not (tmp_path / "a" / "m.train" / "checkpoint.pt").exists() and summary["checkpoint"] is None
    assert loss_steps(tmp_path / "a" / "m.train") == [1, 2, 3]  # the log stays
    with pytest.raises(SbertError, match=r"this run finished .* train again without --resume"):
        regression_trainer(tmp_path / "a", make_tiny_encoder(), checkpoint_every=2, max_steps=3).train(resume=True)

    summary = regression_trainer(tmp_path / "b", make_tiny_encoder(), max_steps=3, keep_checkpoint=True).train()
    kept = tmp_path / "b" / "m.train" / "checkpoint.pt"
    assert summary["checkpoint"] == str(kept)
    assert torch.load(kept, weights_only=True)["step"] == 3  # the final state


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.mark.parametrize("resume", [False, True])
def test_training_collects_leftovers_of_killed_checkpoint_writes(tmp_path, resume):
    run_dir = tmp_path / "m.train"
    if resume:
        with pytest.raises(TrainingInterrupted):
            regression_trainer(tmp_path, make_tiny_encoder(), max_steps=3).train(on_step=signal_at(1, signal.SIGINT))
    run_dir.mkdir(exist_ok=True)
    dead = run_dir / f".checkpoint.pt.tmp-{_dead_pid()}-0123abcd"
    dead.write_bytes(b"half a checkpoint")
    alive = run_dir / f".checkpoint.pt.tmp-{os.getppid()}-4567cdef"  # a writer that still runs
    alive.write_bytes(b"being written")
    seen = {}
    regression_trainer(tmp_path, make_tiny_encoder(), max_steps=3).train(
        resume=resume, on_step=lambda step, loss: seen.setdefault(step, dead.exists())
    )
    assert seen[min(seen)] is False  # gone before the first step, not only at the next checkpoint write
    assert alive.exists()
