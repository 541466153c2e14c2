"""Data-parallel training with torchrun: two CPU processes (gloo) take the same steps as one process on
the same global batches, for the paper's three objectives and for in-batch negatives; checkpoints are
written by rank 0 and a run resumed under torchrun ends with the uninterrupted weights.

The tiny model has no dropout (p=0), so that one process and two ranks can be compared (see
tests/ddp_worker.py). One torchrun launch trains every case; the comparisons read its files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import slow_fixture
from ddp_worker import CASES, objective, train

from sbert.data.examples import RetrievalExample
from sbert.losses.in_batch import share_of_columns
from sbert.training import distributed

WORKER = Path(__file__).resolve().parents[2] / "ddp_worker.py"


@slow_fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    """The folder where ``torchrun --nproc_per_node 2`` left each case's weights (rank 0's)."""
    out = tmp_path_factory.mktemp("ddp")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*command, str(WORKER), str(out)], capture_output=True, text=True, timeout=600, env=env, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    worst = max(a, key=lambda k: (a[k].float() - b[k].float()).abs().max().item())
    assert (a[worst].float() - b[worst].float()).abs().max().item() <= atol, f"largest difference in {worst}"


@pytest.mark.parametrize("case", CASES)
def test_two_ranks_take_the_steps_of_one_process_on_the_global_batch(two_ranks, tmp_path, case):
    assert (two_ranks / "world").read_text() == "2"
    one = train(case, tmp_path)
    two = torch.load(two_ranks / f"{case}.pt", weights_only=True)
    assert_same_weights(two, one)


def test_training_moved_the_weights(two_ranks):
    """The comparison above is not between untouched models: two ranks changed every case's weights."""
    from conftest import make_tiny_encoder

    start = make_tiny_encoder(seed=0, dropout=0.0).state_dict()
    for case in CASES:
        trained = torch.load(two_ranks / f"{case}.pt", weights_only=True)
        moved = max((trained[k] - v).abs().max().item() for k, v in start.items())
        assert moved > 1e-3, case


def test_rank_zero_alone_writes_checkpoints_and_resume_gives_the_uninterrupted_weights(two_ranks, tmp_path):
    written = sorted(p.name for p in two_ranks.glob("checkpoint-written-by-rank-*"))
    assert written == ["checkpoint-written-by-rank-0"]
    resumed = torch.load(two_ranks / "resumed.pt", weights_only=True)
    assert_same_weights(resumed, torch.load(two_ranks / "classification.pt", weights_only=True))
    log = two_ranks / "resumed" / "model.train" / "log.jsonl"
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines() if '"loss"' in line]
    assert steps == [1, 2, 3, 4, 5, 6]  # one row a step: rank 0 logs, the rows after the checkpoint redone
    assert not (two_ranks / "resumed" / "model.train" / "checkpoint.pt").exists()
    assert (two_ranks / "resumed" / "model" / "modules.json").is_file()


def test_logged_loss_is_the_global_batch_loss(two_ranks, tmp_path):
    """Rank 0 logs the loss of the whole batch, as one process does, not its own share's."""
    train("classification", tmp_path)
    one = [json.loads(x) for x in (tmp_path / "model.train" / "log.jsonl").read_text().splitlines() if '"loss"' in x]
    log = (two_ranks / "classification" / "model.train" / "log.jsonl").read_text().splitlines()
    two = [json.loads(x) for x in log if '"loss"' in x]
    assert [r["loss"] for r in two] == pytest.approx([r["loss"] for r in one], abs=1e-5)


def test_one_process_shares_are_the_whole_batch():
    assert distributed.world_size() == 1 and distributed.share(7) == slice(0, 7)
    columns = [["a", "b"], ["c", "d"], ["e"]]
    assert share_of_columns(columns) == columns
    assert isinstance(objective("mnrl").examples[0], RetrievalExample)


@pytest.mark.parametrize(
    ("n", "ranks", "sizes"), [(13, 2, [7, 6]), (1, 2, [1, 0]), (10, 4, [3, 3, 2, 2]), (2, 3, [1, 1, 0])]
)
def test_shares_are_contiguous_and_cover_the_batch(monkeypatch, n, ranks, sizes):
    monkeypatch.setattr(distributed, "world_size", lambda: ranks)
    slices = [distributed.share(n, r) for r in range(ranks)]
    assert [s.stop - s.start for s in slices] == sizes
    assert [i for s in slices for i in range(n)[s]] == list(range(n))


def test_columns_are_shared_in_order_across_ranks(monkeypatch):
    columns = [["a1", "a2", "a3"], ["p1", "p2", "p3"], ["n1"]]  # 7 texts: ranks take 4 and 3
    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    monkeypatch.setattr(distributed, "rank", lambda: 0)
    assert share_of_columns(columns) == [["a1", "a2", "a3"], ["p1"], []]
    monkeypatch.setattr(distributed, "rank", lambda: 1)
    assert share_of_columns(columns) == [[], ["p2", "p3"], ["n1"]]


@pytest.mark.slow
def test_sbert_train_nproc_2_takes_the_steps_of_one_process(tmp_path):
    """``sbert train --nproc 2`` relaunches itself under torchrun: mnrl from the command line, two ranks
    gathering each other's vectors, ends with the weights of the same command in one process."""
    from conftest import make_tiny_encoder
    from ddp_worker import _text
    from safetensors.torch import load_file

    make_tiny_encoder(seed=0, dropout=0.0).save(tmp_path / "tiny")
    rows = [[_text(i, 0), _text(i, 1), *(_text(i, 5 + k) for k in range(1 + i % 2))] for i in range(13)]
    data = tmp_path / "train.tsv"
    data.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def train_cli(out: str, *extra: str) -> Path:
        command = [sys.executable, "-m", "sbert", "train", "--model", str(tmp_path / "tiny"), "--objective", "mnrl"]
        command += ["--format", "ntuples", "--train", str(data), "--batch-size", "6", "--epochs", "2"]
        command += ["--device", "cpu", "--no-progress", "--out", str(tmp_path / out), *extra]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return tmp_path / out

    one, two = train_cli("one"), train_cli("two", "--nproc", "2")
    assert_same_weights(load_file(two / "model.safetensors"), load_file(one / "model.safetensors"))
    log = [json.loads(line) for line in (two.parent / "two.train" / "log.jsonl").read_text().splitlines()]
    steps = [row for row in log if "loss" in row]
    assert [row["step"] for row in steps] == [1, 2, 3, 4, 5, 6]  # rank 0 alone logs
    assert all(row["seconds"] >= 0 for row in steps)


def test_nproc_is_refused_under_torchrun(monkeypatch):
    from click.testing import CliRunner

    from sbert.cli import main

    monkeypatch.setenv("LOCAL_RANK", "0")
    result = CliRunner().invoke(main, ["train", "--nproc", "2", "--objective", "mnrl"])
    assert result.exit_code == 2
    assert "leave it out when running under torchrun" in result.output
