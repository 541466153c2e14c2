"""Long runs say what they will do before their first step, and show their progress where standard error is
not a terminal: plain lines with an estimate of the time left, at a bounded rate (``sbert.progress``)."""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sbert.progress import INTERVAL_ENV, HiddenBar, PlainProgress, line_interval, progress_bar


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_bar(total: int, seconds_each: float, interval: float, asked: bool = False) -> list[str]:
    """The lines a ``PlainProgress`` writes over ``total`` steps of ``seconds_each``."""
    clock, out = Clock(), io.StringIO()
    with PlainProgress(total, "train", "step", interval=interval, asked=asked, stream=out, clock=clock) as bar:
        for _ in range(total):
            clock.now += seconds_each
            bar.set_postfix(loss="0.1234", refresh=False)
            bar.update(1)
    return out.getvalue().splitlines()


def test_a_slow_run_writes_a_line_each_interval_with_the_time_left():
    lines = run_bar(100, 4.0, interval=30)  # 6m 40s in all
    assert lines[0] == "train: 8/100 steps (8%), 32s elapsed, about 6m 08s left (4.0 s/step); loss 0.1234"
    assert len(lines) == 13  # one each 30 s (a tenth of the way takes 40 s), and the last
    assert lines[-1] == "train: 100/100 steps in 6m 40s (4.0 s/step); loss 0.1234"


def test_a_fast_run_writes_a_line_each_tenth_but_never_closer_than_a_tenth_of_the_interval():
    tenths = run_bar(100, 0.5, interval=30)  # 50 s: a tenth of the way each 5 s
    assert len(tenths) == 10 and tenths[0].startswith("train: 10/100 steps (10%), 5s elapsed, about 45s left")
    crowded = run_bar(100, 0.01, interval=30)  # 1 s: the tenths come faster than one line each 3 s
    assert crowded == []  # too short to need a line at all


def test_a_run_shown_on_request_always_ends_with_a_line():
    assert run_bar(2, 0.01, interval=30, asked=True) == ["train: 2/2 steps in 0s (100 steps/s); loss 0.1234"]


def test_off_a_terminal_a_bar_is_plain_lines_and_hidden_stays_hidden(monkeypatch, capsys):
    monkeypatch.setenv(INTERVAL_ENV, "0.01")
    assert isinstance(progress_bar(10, "x", False), HiddenBar)
    assert isinstance(progress_bar(10, "x", None, from_items=100), HiddenBar)
    with progress_bar(4, "encode", None, "text") as bar:
        assert isinstance(bar, PlainProgress)
        for _ in range(4):
            time.sleep(0.01)
            bar.update(1)
    err = capsys.readouterr().err
    assert re.search(r"^encode: \d/4 texts \(\d+%\), \d+s elapsed", err, re.M), err


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert line_interval() == 30
    monkeypatch.setenv(INTERVAL_ENV, "2.5")
    assert line_interval() == 2.5
    for bad in ("soon", "0", "-1", "nan"):
        monkeypatch.setenv(INTERVAL_ENV, bad)
        with pytest.raises(ValueError, match=rf"\$SBERT_PROGRESS_INTERVAL='{re.escape(bad)}': expected a number"):
            line_interval()


def _reports(path: Path, count: int = 24) -> Path:
    """A tracker's export as JSON lines: a title and a body each."""
    rng = random.Random(0)
    words = ["printer", "calc", "writer", "crash", "hang", "slow", "font", "table", "chart", "save", "load", "page"]
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(count):
            row = {"_id": f"r{i}", "title": " ".join(rng.sample(words, 3)), "text": " ".join(rng.choices(words, k=30))}
            handle.write(json.dumps(row) + "\n")
    return path


def _sbert() -> list[str]:
    script = shutil.which("sbert", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "sbert"]


@pytest.mark.slow
def test_the_readme_adapt_with_stderr_to_a_file_says_its_plan_progress_and_time_left(tmp_path):
    """README's "your own collection": ``sbert adapt default --corpus reports.jsonl --out models/reports``,
    from a fresh shell whose standard error goes to a file (nohup, CI)."""
    corpus = _reports(tmp_path / "reports.jsonl")
    log = tmp_path / "adapt.log"
    command = [*_sbert(), "adapt", "default", "--corpus", str(corpus), "--out", str(tmp_path / "models" / "reports")]
    command += ["--steps", "3", "--batch-size", "4", "--device", "cpu"]
    env = {**os.environ, INTERVAL_ENV: "0.01"}
    with open(log, "w", encoding="utf-8") as err:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=env, timeout=600
        )
    text = log.read_text(encoding="utf-8")
    assert done.returncode == 0, text
    lines = text.splitlines()
    plan = next(i for i, line in enumerate(lines) if line.startswith("adapt: "))
    assert re.fullmatch(
        r"adapt: \d+ documents of .*reports\.jsonl( \(\d+ more held out\))?, \d+ pseudo-queries \(method title\); "
        r"3 steps x batch 4",
        lines[plan],
    ), lines[plan]
    steps = [i for i, line in enumerate(lines) if re.match(r"train: \d/3 steps", line)]
    assert steps and min(steps) > plan, text  # the plan comes before the first step
    assert any(re.search(r"train: [12]/3 steps \(\d+%\), \d+s elapsed, about \d+s left", lines[i]) for i in steps)
    assert "\r" not in text  # no bar drawn into the file
    assert "model saved to" in lines[-1]
