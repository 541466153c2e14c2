"""Trains the cases of tests/unit/training/test_distributed.py: in one process (imported by the test), or as one rank of
``torchrun --nproc_per_node 2 tests/ddp_worker.py OUT`` (run by the test), which writes OUT/<case>.pt.

The tiny model has no dropout (p=0): with dropout, each rank would draw its own masks and the run could
not equal one process; everything else (batches, gradients, schedule, clipping) must match. In the triplet
case the last LayerNorm's bias is frozen: it moves every vector alike, so euclidean distances do not see it
and its gradient is zero but for rounding, which differs between one process and two and which AdamW
(eps 1e-8) would turn into whole steps of lr.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import torch
from conftest import TINY_WORDS as WORDS
from conftest import make_tiny_encoder

from sbert.data.examples import LabeledPair, RetrievalExample, ScoredPair, Triplet
from sbert.losses import CachedMultipleNegativesRankingLoss, MultipleNegativesRankingLoss
from sbert.losses.regression import CosineRegressionLoss
from sbert.losses.softmax import SoftmaxLoss
from sbert.losses.triplet import TripletLoss
from sbert.training import Objective, TrainConfig, Trainer, distributed

ROWS = 13  # batches of 6, 6 and 1: the last one leaves a rank of two without a row
CASES = ("classification", "regression", "triplet", "mnrl", "cached-mnrl")


def _text(i: int, k: int) -> str:
    return " ".join(WORDS[(i * 3 + k + j) % len(WORDS)] for j in range(1 + (i + k) % 5))


def objective(case: str) -> Objective:
    """The examples and the loss of ``case`` (the classifier's weights seeded, the same on every rank)."""
    torch.manual_seed(1)
    if case == "classification":
        examples, loss = [LabeledPair(_text(i, 0), _text(i, 1), i % 3) for i in range(ROWS)], SoftmaxLoss(16, 3)
    elif case == "regression":
        examples, loss = [ScoredPair(_text(i, 0), _text(i, 2), i % 6) for i in range(ROWS)], CosineRegressionLoss()
    elif case == "triplet":
        examples, loss = [Triplet(_text(i, 0), _text(i, 1), _text(i, 7)) for i in range(ROWS)], TripletLoss()
    else:
        examples = [
            RetrievalExample(_text(i, 0), _text(i, 1), tuple(_text(i, 5 + k) for k in range(i % 3)))
            for i in range(ROWS)
        ]
        loss = (
            CachedMultipleNegativesRankingLoss(mini_batch_size=3)
            if case == "cached-mnrl"
            else (MultipleNegativesRankingLoss())
        )
    return Objective(examples, loss, case)


class Stop(Exception):
    """Raised from ``on_step`` on every rank: a run killed after a checkpoint."""


def train(case: str, folder: Path, stop_after: int | None = None, resume: bool = False) -> dict[str, torch.Tensor]:
    """Two epochs of ``case`` (6 steps, checkpoints every 2), stopped after step ``stop_after`` if given;
    returns the trained weights of the model and the loss."""
    encoder, goal = make_tiny_encoder(seed=0, dropout=0.0), objective(case)
    if case == "triplet":
        encoder.transformer.model.encoder.layer[0].output.LayerNorm.bias.requires_grad_(False)
    config = TrainConfig(epochs=2, batch_size=6, lr=1e-3, checkpoint_every=2, progress=False)
    trainer = Trainer(encoder, [goal], config, folder / "model", device="cpu")

    def on_step(done: int, value: float) -> None:
        if done == stop_after:
            raise Stop

    trainer.train(resume=resume, on_step=on_step, handle_signals=False)
    return {**encoder.state_dict(), **{f"loss.{k}": v for k, v in goal.loss.state_dict().items()}}


def _record_checkpoint_writers(out: Path) -> None:
    """Each rank that writes a checkpoint leaves a file naming itself."""
    from sbert.training import trainer

    save = trainer.save_checkpoint

    def recording(run_dir, state):
        (out / f"checkpoint-written-by-rank-{distributed.rank()}").touch()
        return save(run_dir, state)

    trainer.save_checkpoint = recording


def main(out: Path) -> None:
    _record_checkpoint_writers(out)
    for case in CASES:
        weights = train(case, out / case)
        if distributed.is_main():
            torch.save(weights, out / f"{case}.pt")
    with contextlib.suppress(Stop):
        train("classification", out / "resumed", stop_after=3)
    weights = train("classification", out / "resumed", resume=True)
    if distributed.is_main():
        torch.save(weights, out / "resumed.pt")
        (out / "world").write_text(str(distributed.world_size()))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
