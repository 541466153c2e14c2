"""The training loop of SBERT fine-tuning, readable top to bottom in ``Trainer.train``.

Several objectives (data + loss) can be trained together: their batches are interleaved round-robin,
one optimizer step per batch. An epoch shows every objective's data once. The order of batches is a
pure function of (seed, epoch, objective), so a run that resumes from a checkpoint takes exactly the
batches the interrupted one would have taken.

While ``train`` runs, a first SIGINT (Ctrl-C) or SIGTERM makes it save a checkpoint at the end of the
current step and raise ``TrainingInterrupted``; a second one stops at once, as without sbert. A loss that is
not finite (NaN or infinite: the training diverged) stops it with ``TrainingDiverged``, saving nothing.

Before its first step it says what it will run (steps, batch, examples) and then shows its progress
(``sbert.progress``: a bar on a terminal, plain lines with the time left elsewhere).

Under ``torchrun`` (``sbert.distributed``) every rank runs this loop over the same global
batches: each takes its share of a batch (losses marked ``global_batch`` take the whole batch and split
it themselves), the ranks' gradients are summed so that every rank takes the one-process step, and only
rank 0 logs, shows progress, evaluates and writes checkpoints and the model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from sbert import distributed
from sbert.atomic import check_model_target, check_replaceable
from sbert.device import resolve_device
from sbert.errors import SbertError
from sbert.locks import hold_lock
from sbert.progress import progress_bar, report
from sbert.training import checkpoint as ckpt
from sbert.training.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from sbert.training.sampling import epoch_batches
from sbert.training.schedule import warmup_steps, warmup_then_linear_decay

_logger = logging.getLogger("sbert.training")
LOCK = ".lock"  # in the run folder, held by the run training into it

if TYPE_CHECKING:
    from sbert.evaluation.base import Evaluator
    from sbert.protocols import PairScorer, TrainableEncoder

    # A bi-encoder, or a cross-encoder; an nn.Module either way: the trainer moves it to the device,
    # checkpoints its state_dict and calls its save.
    TrainableModel = TrainableEncoder | PairScorer


@dataclass
class Objective:
    """Training examples and the loss that consumes a batch of them."""

    examples: Sequence[Any]
    loss: nn.Module
    name: str = "objective"


@dataclass
class TrainConfig:
    """Hyper-parameters; the defaults are the paper's recipe (batch 16, lr 2e-5, 10% warm-up, 1 epoch)."""

    epochs: int = 1
    batch_size: int = 16
    lr: float = 2e-5
    warmup: float = 0.1  # fraction of all steps
    weight_decay: float = 0.01  # not on biases and LayerNorm weights
    adam_eps: float = 1e-8
    max_grad_norm: float | None = 1.0
    seed: int = 42
    max_steps: int | None = None  # stop (and end the schedule) after this many steps
    eval_every: int | None = None  # steps between dev evaluations; always once at the end
    checkpoint_every: int | None = 500  # steps between checkpoints
    shuffle: bool = True
    no_duplicates: bool = True  # in-batch-negatives losses: no batch holds a text twice (sbert.training.sampling)
    amp: str = "auto"  # "auto" (bf16/fp16 on CUDA, off on CPU), "bf16", "fp16" or "off"
    progress: bool | None = None  # None: a bar when standard error is a terminal
    keep_checkpoint: bool = False  # keep run_dir/checkpoint.pt (the final state) after a finished run
    max_seq_length: int | None = None  # cut training texts to this many tokens; the saved model keeps its own


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on SIGINT or SIGTERM after ``step`` of ``total_steps``, with a checkpoint saved.

    A ``KeyboardInterrupt``, so code that stops on Ctrl-C stops on it too; ``exit_code`` is the shell's
    128 + signal number (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, signum: int, step: int, total_steps: int, checkpoint: Path) -> None:
        self.signum, self.step, self.total_steps, self.checkpoint = signum, step, total_steps, checkpoint
        self.exit_code = 128 + signum
        super().__init__(
            f"{self._headline()}; to go on from step {step:,}, run the same command again with --resume "
            "(in Python: train(resume=True))"
        )

    def _headline(self) -> str:
        return (
            f"training stopped by {signal.Signals(self.signum).name} after step {self.step:,} of "
            f"{self.total_steps:,}; checkpoint saved to {self.checkpoint}"
        )

    def explain(self, argv: Sequence[str]) -> str:
        """The message, with the command line ``argv`` (``sys.argv``) turned into the one that resumes."""
        return f"{self._headline()}\ngo on from step {self.step:,} with:\n  {resume_command(argv)}"


class TrainingDiverged(SbertError, ArithmeticError):
    """The loss was not finite (NaN or infinite) at ``step``: training stopped there and saved no model."""

    def __init__(self, loss: float, step: int, total_steps: int, lr: float, out: Path) -> None:
        self.loss, self.step, self.total_steps = loss, step, total_steps
        super().__init__(
            f"training diverged: the loss is {loss} at step {step:,} of {total_steps:,} (learning rate {lr:.3g}); "
            f"stopped without saving the diverged weights ({out} keeps what it held): train again at a lower "
            "learning rate (--lr; in Python, TrainConfig.lr), not resuming"
        )


def resume_command(argv: Sequence[str]) -> str:
    """The sbert command line ``argv`` (``sys.argv``) with ``--resume`` (added where it is not there)."""
    import shlex

    args = list(argv[1:])
    if "--resume" not in args:
        args.append("--resume")
    return f"sbert {shlex.join(args)}"


class _StopOnSignal:
    """While entered (in the main thread): the first SIGINT or SIGTERM is only recorded in ``received``,
    for the loop to stop at the next step boundary; a second one goes to the handler that was there
    before (SIGINT: KeyboardInterrupt at once; SIGTERM: the process ends). Ignored signals stay ignored."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.received: int | None = None
        self.finishing = False  # past the last step: what is left is the final evaluation and save
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopOnSignal:
        if self.enabled and threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                current = signal.getsignal(signum)
                if current is not signal.SIG_IGN and current is not None:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame) -> None:
        if self.received is not None:
            self._restore()
            signal.raise_signal(signum)
            return
        self.received = signum
        then = (
            "the run is finishing (final evaluation and save)"
            if self.finishing
            else "stopping after this step and saving a checkpoint"
        )
        from tqdm.auto import tqdm

        tqdm.write(f"{signal.Signals(signum).name} received: {then}; send it again to stop at once", file=sys.stderr)

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def __exit__(self, *exc: object) -> None:
        self._restore()


@dataclass
class _Parts:
    """What a call of ``Trainer.train`` steps: the model and the losses' own weights (classifier heads) on
    the device, the optimizer over both, the schedule, and mixed precision's autocast and loss scaler."""

    model: nn.Module
    losses: nn.ModuleList
    params: list[nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: LambdaLR
    autocast: Callable[[], contextlib.AbstractContextManager]
    scaler: torch.amp.GradScaler

    def state_dict(self) -> dict[str, Any]:
        return {
            "encoder": self.model.state_dict(),
            "losses": self.losses.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["encoder"])
        self.losses.load_state_dict(state["losses"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])


class Trainer:
    """Fine-tunes ``encoder`` (a bi-encoder, or a cross-encoder) on ``objectives``; saves the best (or
    final) model to ``out``. ``evaluator`` scores the dev data and names the metric the best model is
    kept by (``sbert.evaluation.Evaluator``).

    ``run_dir`` (default ``<out>.train``) holds ``checkpoint.pt`` and ``log.jsonl``.
    """

    def __init__(
        self,
        encoder: TrainableModel,
        objectives: Sequence[Objective],
        config: TrainConfig,
        out: str | Path,
        evaluator: Evaluator | None = None,
        run_dir: str | Path | None = None,
        device: str | None = None,
    ) -> None:
        if not objectives or any(len(o.examples) == 0 for o in objectives):
            raise ValueError("training needs at least one objective, each with at least one example")
        if evaluator is not None:
            _primary_metric(
                evaluator, encoder
            )  # an evaluator that names none is refused now, not at the first evaluation
        self.encoder, self.objectives, self.config = encoder, list(objectives), config
        self._model_length = getattr(encoder, "max_seq_length", None)  # what the saved model keeps
        self.out = Path(out)
        check_replaceable(self.out)  # a folder of other files is refused now, not after hours of training
        self.run_dir = Path(run_dir) if run_dir else self.out.with_name(self.out.name + ".train")
        self.evaluator = evaluator
        self.device = distributed.init_from_env(torch.device(resolve_device(device)))
        self._plan: tuple[int, list[tuple[int, np.ndarray]]] | None = None  # the last epoch planned
        self._epoch_lengths: dict[int, int] = {}
        self.moved: dict[tuple[int, int], int] = {}  # (epoch, objective) -> rows the sampler moved
        self.total_steps = self._count_steps()
        self.best: float | None = None

    # -- the loop: set up, step, evaluate and checkpoint when due, finish --------------------------------
    def train(
        self,
        resume: bool = False,
        on_step: Callable[[int, float], None] | None = None,
        handle_signals: bool = True,
    ) -> dict:
        """Run to the end (or on from the last checkpoint when ``resume``); returns a summary.

        With ``handle_signals`` (in the main thread), SIGINT or SIGTERM saves a checkpoint at the end of
        the current step and raises ``TrainingInterrupted``. A finished run removes its checkpoint unless
        ``config.keep_checkpoint``; ``log.jsonl`` stays.
        """
        with self._sole_writer():
            return self._train(resume, on_step, handle_signals)

    @contextlib.contextmanager
    def _sole_writer(self) -> Iterator[None]:
        """Hold ``run_dir``'s lock (on the main process) for the whole run: a second run training into the same
        folder is refused, never mixed into this one's checkpoint and log."""
        if not distributed.is_main():
            yield
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)

        def busy(holder: str) -> SbertError:
            return SbertError(
                f"{self.run_dir}: another run ({holder}) is training into this folder; wait for it or "
                "give another --out"
            )

        with hold_lock(self.run_dir / LOCK, 0, busy):
            yield

    def _train(self, resume: bool, on_step: Callable[[int, float], None] | None, handle_signals: bool) -> dict:
        if distributed.is_main():  # before the set-up, which may take a pass over the data (a teacher's vectors)
            report(self.plan(resume), self.config.progress)
        parts, start = self._set_up(resume)
        running = None  # the loss shown on the bar, smoothed
        began = time.perf_counter()
        with (
            self._training_length(),
            _StopOnSignal(handle_signals) as stop,
            self._progress_bar(start) as bar,
        ):
            for step, epoch, objective, batch in self._batches(start):
                value = self._step(parts, objective, batch)
                done = step + 1
                if not math.isfinite(value):  # the same on every rank: the loss is summed over them
                    self._log({"step": done, "objective": objective.name, "diverged": str(value)})
                    lr = parts.scheduler.get_last_lr()[0]
                    raise TrainingDiverged(value, done, self.total_steps, float(lr), self.out)
                running = value if running is None else 0.98 * running + 0.02 * value
                bar.set_postfix(loss=f"{running:.4f}", refresh=False)
                bar.update(1)
                lr = parts.scheduler.get_last_lr()[0]
                seconds = round(time.perf_counter() - began, 3)  # since this run (or resume) began
                self._log(
                    {
                        "step": done,
                        "epoch": epoch,
                        "objective": objective.name,
                        "loss": value,
                        "lr": lr,
                        "seconds": seconds,
                    }
                )
                if self._due(self.config.eval_every, done):
                    self._evaluate(done, bar)
                if on_step is not None:
                    on_step(done, value)
                self._checkpoint_when_due(done, parts, stop)
            elapsed = time.perf_counter() - began  # the training loop alone
            stop.finishing = True
            score, checkpoint = self._finish(parts, bar)
        return self._summary(start, elapsed, score, checkpoint)

    def plan(self, resume: bool = False) -> str:
        """What ``train`` says before it sets up: steps, batch, examples, where the model and the checkpoints
        go (and, with ``resume``, that it goes on from the checkpoint there)."""
        examples = sum(len(o.examples) for o in self.objectives)
        tasks = f" of {len(self.objectives)} objectives" if len(self.objectives) > 1 else ""
        steps = f"{self.total_steps:,} step{'' if self.total_steps == 1 else 's'}"
        line = f"train: {steps} x batch {self.config.batch_size} over {examples:,} examples{tasks}"
        if resume and (self.run_dir / ckpt.FILE).is_file():
            line += f", going on from {self.run_dir / ckpt.FILE}"
        every = self.config.checkpoint_every
        saved = f"checkpoints every {every:,} steps in {self.run_dir}" if every else f"log in {self.run_dir}"
        return f"{line}; model to {self.out}, {saved}"

    def _set_up(self, resume: bool) -> tuple[_Parts, int]:
        """Model and losses on the device, optimizer, schedule; restored from the checkpoint when
        ``resume``. Returns them and the step to start from."""
        cfg = self.config
        torch.manual_seed(cfg.seed)
        model = self.encoder.to(self.device)
        losses = nn.ModuleList([o.loss for o in self.objectives]).to(self.device)
        _prepare_losses(self.objectives, model, self.device)
        params = _unique_params([model, losses])
        optimizer = torch.optim.AdamW(
            _param_groups(params, cfg.weight_decay),
            lr=cfg.lr,
            eps=cfg.adam_eps,
            fused=True,  # 5x faster on CPU
        )
        scheduler = warmup_then_linear_decay(optimizer, warmup_steps(self.total_steps, cfg.warmup), self.total_steps)
        parts = _Parts(model, losses, params, optimizer, scheduler, *self._mixed_precision())

        if distributed.is_main():
            ckpt.collect_checkpoint_leftovers(self.run_dir)  # temporary files of killed checkpoint writes
        distributed.barrier()
        start = self._restore(parts) if resume else 0
        if start == 0 and distributed.is_main():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "log.jsonl").write_text("")
        distributed.broadcast_module(model)  # every rank starts from rank 0's weights
        distributed.broadcast_module(losses)
        if distributed.rank() > 0:  # dropout: other masks on other ranks
            torch.manual_seed(cfg.seed + 1_000_003 * distributed.rank() + start)
        model.train()
        losses.train()
        return parts, start

    def _batches(self, start: int) -> Iterator[tuple[int, int, Objective, list]]:
        """(step, epoch, objective, its batch of examples) for each step from ``start`` to the end."""
        first = 0  # the first step of ``epoch``
        for epoch in range(self.config.epochs):
            length = self.epoch_steps(epoch)
            if first + length > start and first < self.total_steps:
                plan = self.epoch_plan(epoch)
                if first >= start:
                    self._log_moved(first, epoch)
                for index in range(max(start - first, 0), min(length, self.total_steps - first)):
                    task, rows = plan[index]
                    objective = self.objectives[task]
                    yield first + index, epoch, objective, [objective.examples[r] for r in rows]
            first += length

    def _step(self, parts: _Parts, objective: Objective, batch: list) -> float:
        """One optimizer step on ``batch``: forward, backward, clip, step, schedule. Returns the loss.
        Under torchrun: this rank's part of the batch, the ranks' gradients summed before clipping."""
        with parts.autocast():
            loss, weight = self._rank_loss(parts, objective, batch)
        if loss is not None and loss.requires_grad:  # a rank with no rows of this batch has no graph
            parts.scaler.scale(loss * weight).backward()
        value = 0.0 if loss is None else float(loss.detach()) * weight
        if distributed.active():  # the ranks' gradients summed, and their parts of the batch's loss
            whole = getattr(objective.loss, "global_batch", False)  # each rank has the whole batch's loss
            value = distributed.sum_gradients(parts.params, value / distributed.world_size() if whole else value)
        if self.config.max_grad_norm:
            parts.scaler.unscale_(parts.optimizer)
            torch.nn.utils.clip_grad_norm_(parts.params, self.config.max_grad_norm)
        parts.scaler.step(parts.optimizer)
        parts.scaler.update()
        parts.scheduler.step()
        parts.optimizer.zero_grad(set_to_none=True)
        return value

    def _rank_loss(self, parts: _Parts, objective: Objective, batch: list) -> tuple[torch.Tensor | None, float]:
        """This rank's loss and its weight: the ranks' weighted gradients add up to the whole batch's.
        A ``global_batch`` loss gets the whole batch (weight 1: it differentiates through its own share);
        another loss gets this rank's rows (weight rows / batch), or none, when the batch is too short."""
        if getattr(objective.loss, "global_batch", False) or not distributed.active():
            return objective.loss(parts.model, batch), 1.0
        rows = batch[distributed.share(len(batch))]
        if not rows:
            return None, 0.0
        return objective.loss(parts.model, rows), len(rows) / len(batch)

    def _due(self, every: int | None, done: int) -> bool:
        """Whether a periodic event (every ``every`` steps) falls after step ``done``; never after the last
        step, whose evaluation and save ``_finish`` does."""
        return every is not None and every > 0 and done % every == 0 and done < self.total_steps

    def _checkpoint_when_due(self, done: int, parts: _Parts, stop: _StopOnSignal) -> None:
        """A periodic checkpoint; or, after SIGINT/SIGTERM, a checkpoint and ``TrainingInterrupted``."""
        received = distributed.agree_on_stop(stop.received)  # every rank stops after the same step
        if not self._due(self.config.checkpoint_every, done) and received is None:
            return
        path = self._checkpoint(done, parts)
        if received is not None:
            self._log({"step": done, "interrupted": signal.Signals(received).name})
            raise TrainingInterrupted(received, done, self.total_steps, path)

    @contextlib.contextmanager
    def _max_seq_length(self, length: int | None):
        """Within: the encoder cuts texts at ``length`` (None, or no length limit on the encoder: unchanged)."""
        before = getattr(self.encoder, "max_seq_length", None)
        if length is None or before is None or length == before:
            yield
            return
        self.encoder.max_seq_length = length
        try:
            yield
        finally:
            self.encoder.max_seq_length = before

    def _training_length(self):
        """Training texts cut at ``config.max_seq_length`` where it is below the model's own limit."""
        cut, own = self.config.max_seq_length, self._model_length
        return self._max_seq_length(cut if cut is not None and own is not None and cut < own else None)

    def _save(self) -> None:
        """Save the model to ``out`` with its own length limit, not the training cut."""
        with self._max_seq_length(self._model_length):
            self.encoder.save(self.out)

    def _finish(self, parts: _Parts, bar) -> tuple[float | None, Path | None]:
        """The final evaluation and save; the checkpoint kept (``keep_checkpoint``) or removed."""
        score = self._evaluate(self.total_steps, bar)
        if self.evaluator is None and distributed.is_main():
            self._save()
        if self.config.keep_checkpoint:
            return score, self._checkpoint(self.total_steps, parts)
        if distributed.is_main():
            (self.run_dir / ckpt.FILE).unlink(missing_ok=True)
        distributed.barrier()
        return score, None

    def _summary(self, start: int, elapsed: float, score: float | None, checkpoint: Path | None) -> dict:
        steps_run = self.total_steps - start
        summary: dict[str, Any] = {
            "steps": self.total_steps,
            "steps_run": steps_run,
            "seconds": elapsed,
            "steps_per_second": steps_run / elapsed if elapsed else 0.0,
            "final_score": score,
            "best_score": self.best,
            "model": str(self.out),
            "log": str(self.run_dir / "log.jsonl"),
            "checkpoint": None if checkpoint is None else str(checkpoint),
        }
        guided = self._guided()
        if guided:
            summary["guide_dropped"] = guided
        self._log({"summary": summary})
        return summary

    def _guided(self) -> dict[str, dict[str, int]]:
        """What each guided objective's guide (``--guide``) dropped in this run, said by the logger too."""
        found = {}
        for objective in self.objectives:
            guide = getattr(objective.loss, "guide", None)
            if guide is not None:
                _logger.info("%s: the guide's masking: %s", objective.name, guide.counts)
                found[objective.name] = dataclasses.asdict(guide.counts)
        return found

    def epoch_plan(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        """(objective index, example rows) for each step of ``epoch``, objectives taken round-robin.
        In-batch-negatives objectives get batches without a text twice (``config.no_duplicates``)."""
        if self._plan is not None and self._plan[0] == epoch:
            return self._plan[1]
        queues = []
        for task, objective in enumerate(self.objectives):
            cut = epoch_batches(
                objective.examples,
                self.config.batch_size,
                (self.config.seed, epoch, task),
                shuffle=self.config.shuffle,
                no_duplicates=self._deduplicates(objective),
            )
            self.moved[epoch, task] = cut.moved
            queues.append(cut.batches)
        plan = []
        for i in range(max(len(queue) for queue in queues)):
            plan += [(task, queue[i]) for task, queue in enumerate(queues) if i < len(queue)]
        self._plan, self._epoch_lengths[epoch] = (epoch, plan), len(plan)
        return plan

    def _deduplicates(self, objective: Objective) -> bool:
        return self.config.no_duplicates and getattr(objective.loss, "in_batch_negatives", False)

    def epoch_steps(self, epoch: int) -> int:
        """Steps of ``epoch``: a batch per ``batch_size`` examples of each objective, plus the batches the
        no-duplicates sampler adds where rows share texts (then the epoch is planned to count them)."""
        if not any(self._deduplicates(o) for o in self.objectives):
            return sum(math.ceil(len(o.examples) / self.config.batch_size) for o in self.objectives)
        if epoch not in self._epoch_lengths:
            self.epoch_plan(epoch)
        return self._epoch_lengths[epoch]

    def _count_steps(self) -> int:
        """All steps of the run: its epochs' steps, or ``max_steps`` when that comes first."""
        total, limit = 0, self.config.max_steps
        for epoch in range(self.config.epochs):
            if limit is not None and total >= limit:
                break
            total += self.epoch_steps(epoch)
        return total if limit is None else min(total, limit)

    def _log_moved(self, step: int, epoch: int) -> None:
        """Say (log.jsonl, with the epoch's first step, and the ``sbert.training`` logger) how many rows the
        sampler moved in ``epoch``, which begins after ``step`` steps."""
        for task, objective in enumerate(self.objectives):
            if self._deduplicates(objective):
                moved = self.moved[epoch, task]
                _logger.info(
                    "epoch %d, %s: %d rows moved to keep texts out of batches holding them",
                    epoch,
                    objective.name,
                    moved,
                )
                self._log({"step": step + 1, "epoch": epoch, "objective": objective.name, "sampler_moved": moved})

    # -- pieces ----------------------------------------------------------------------------------------
    def _progress_bar(self, start: int):
        shown = self.config.progress if distributed.is_main() else False
        return progress_bar(self.total_steps, "train", shown, unit="step", initial=start)

    def _mixed_precision(self) -> tuple[Callable[[], contextlib.AbstractContextManager], torch.amp.GradScaler]:
        mode = self.config.amp
        if mode not in ("auto", "bf16", "fp16", "off"):
            raise ValueError(f"amp must be auto, bf16, fp16 or off; got {mode!r}")
        cuda = self.device.type == "cuda"
        if mode == "auto":
            mode = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if cuda else "off"
        if mode == "off":
            return contextlib.nullcontext, torch.amp.GradScaler(enabled=False)
        dtype = torch.bfloat16 if mode == "bf16" else torch.float16

        def autocast():
            return torch.autocast(self.device.type, dtype=dtype)

        return autocast, torch.amp.GradScaler(enabled=mode == "fp16" and cuda)

    def _evaluate(self, step: int, bar=None) -> float | None:
        """Score the dev data by the evaluator's headline metric; a better score saves the model. With
        the training bar shown, the evaluation shows its progress too."""
        if self.evaluator is None or not distributed.is_main():  # under torchrun, rank 0 evaluates
            return None
        shown = bar is not None and not bar.disable
        if shown:
            bar.set_description_str(f"train: dev evaluation at step {step:,}", refresh=True)
        metrics = _call_evaluator(self.evaluator, self.encoder, shown)
        if shown:
            bar.set_description_str("train", refresh=True)
        primary = _primary_metric(self.evaluator, self.encoder)
        score = metrics[primary]
        improved = self.best is None or score > self.best
        if improved:
            self.best = score
            self._save()  # keep the best model so far
        self._log({"step": step, "dev": metrics, "primary": primary, "best": improved})
        return score

    def _log(self, row: dict) -> None:
        if not distributed.is_main():
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / "log.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")

    def fingerprint(self) -> dict:
        """What must match for a checkpoint to be resumed: settings that shape the batches and schedule."""
        cfg = dataclasses.asdict(self.config)
        keys = (
            "epochs",
            "batch_size",
            "lr",
            "warmup",
            "weight_decay",
            "adam_eps",
            "seed",
            "max_steps",
            "shuffle",
            "no_duplicates",
        )
        from sbert.adapters import adapter_shape

        adapter = adapter_shape(self.encoder) if hasattr(self.encoder, "transformer") else None
        return {
            **{k: cfg[k] for k in keys},
            "objectives": [[o.name, len(o.examples)] for o in self.objectives],
            **({"lora": adapter} if adapter else {}),  # a LoRA run's checkpoint holds its adapter's weights
        }

    def _checkpoint(self, step: int, parts: _Parts) -> Path:
        """Rank 0 writes ``checkpoint.pt`` (atomically); under torchrun the others wait until it is there."""
        path = self.run_dir / ckpt.FILE
        if distributed.is_main():
            state = {"step": step, "fingerprint": json.dumps(self.fingerprint(), sort_keys=True)}
            path = save_checkpoint(self.run_dir, {**state, **parts.state_dict(), "rng": rng_state(), "best": self.best})
        distributed.barrier()
        return path

    def _restore(self, parts: _Parts) -> int:
        state = load_checkpoint(self.run_dir)
        if state is None:
            self._refuse_finished_run()
            return 0
        mine, theirs = self.fingerprint(), json.loads(state["fingerprint"])
        if mine != theirs:
            diff = {k: (theirs.get(k), mine.get(k)) for k in mine if theirs.get(k) != mine.get(k)}
            raise SbertError(
                f"{self.run_dir}: the checkpoint was made with other settings (checkpoint vs now: {diff}); "
                "resume with the same settings, or start afresh without --resume"
            )
        parts.load_state_dict(state)
        set_rng_state(state["rng"])
        self.best = state["best"]
        step = int(state["step"])
        if distributed.is_main():
            self._truncate_log(step)
        return step

    def _refuse_finished_run(self) -> None:
        """--resume of a run that finished (its log ends with the summary, its checkpoint removed)."""
        if finished_run(self.run_dir):
            raise SbertError(
                f"{self.run_dir}: this run finished (see the summary at the end of log.jsonl; model in "
                f"{self.out}) and left no checkpoint to resume; train again without --resume"
            )

    def _truncate_log(self, step: int) -> None:
        """Drop log rows written after the checkpoint, so a resumed run does not repeat steps."""
        path = self.run_dir / "log.jsonl"
        if not path.is_file():
            return
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        kept = [row for row in rows if "step" in row and row["step"] <= step]
        path.write_text("".join(json.dumps(row) + "\n" for row in kept), encoding="utf-8")


def finished_run(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` finished: its ``log.jsonl`` ends with the summary."""
    path = Path(run_dir) / "log.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return bool(lines) and lines[-1].startswith('{"summary"')


def stopped_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run to go on from: a checkpoint, or what a stopped run keeps there (a
    teacher's scores so far, a first stage), with no summary at the end of its log."""
    run_dir = Path(run_dir)
    if (run_dir / ckpt.FILE).is_file():
        return True
    return run_dir.is_dir() and not finished_run(run_dir) and any(p.name != LOCK for p in run_dir.iterdir())


def check_out(
    out: str | Path, *, overwrite: bool = False, resume: bool = False, run_dir: str | Path | None = None
) -> None:
    """Refuse, before anything is read or loaded, to train into ``out`` where a model already is: unless
    ``overwrite``, or ``resume`` with a stopped run in ``run_dir`` (default ``<out>.train``) to go on from. A
    folder of other files is refused either way (``sbert.atomic.check_replaceable``)."""
    out = Path(out)
    run_dir = Path(run_dir) if run_dir else out.with_name(out.name + ".train")
    if resume and stopped_run(run_dir):
        check_replaceable(out)
        return
    if not resume:
        then = "to replace it, or pass resume=True (--resume) to go on with a run that was stopped"
        check_model_target(out, overwrite, then=then)
        return
    reason = (
        f" and the run in {run_dir} finished, leaving nothing to resume"
        if finished_run(run_dir)
        else f" and {run_dir} holds no stopped run to resume"
    )
    check_model_target(out, overwrite, reason=reason, then="to train afresh over it")


def _primary_metric(evaluator: Evaluator, model: TrainableModel) -> str:
    """The key of ``evaluator``'s headline metric for ``model``; refused if it names none."""
    if not callable(getattr(evaluator, "primary_metric", None)):
        raise TypeError(
            f"evaluator {evaluator!r} names no headline metric: give it a primary_metric(model) method "
            "returning the key of the number to keep the best model by (sbert.evaluation.Evaluator)"
        )
    return evaluator.primary_metric(model)


def _call_evaluator(evaluator: Evaluator, model: TrainableModel, show_progress: bool) -> dict[str, float]:
    """``evaluator(model)``, passing ``show_progress`` to evaluators that take it (sbert's do)."""
    try:
        takes = "show_progress" in inspect.signature(evaluator).parameters
    except (TypeError, ValueError):  # a callable without a signature
        takes = False
    return evaluator(model, show_progress=show_progress) if takes else evaluator(model)


def _prepare_losses(objectives: Sequence[Objective], model: nn.Module, device: torch.device) -> None:
    """Losses that take a pass over their examples first (``EmbeddingMSELoss``: the teacher's vectors of
    every text, once) get it: ``loss.prepare(examples, model, device)``."""
    for objective in objectives:
        prepare = getattr(objective.loss, "prepare", None)
        if callable(prepare):
            prepare(objective.examples, model, device)


def _unique_params(modules: Sequence[nn.Module]) -> list[nn.Parameter]:
    seen, params = set(), []
    for module in modules:
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
    return params


def _param_groups(params: list[nn.Parameter], weight_decay: float) -> list[dict]:
    """Weight decay on matrices only: biases and LayerNorm weights (1-D) are left alone."""
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
