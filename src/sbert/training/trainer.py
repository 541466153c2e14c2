"""The training loop of SBERT fine-tuning, readable top to bottom in ``Trainer.train``.

Several objectives (data + loss) can be trained together: their batches are interleaved round-robin,
one optimizer step per batch. An epoch shows every objective's data once. The order of batches is a
pure function of (seed, epoch, objective), so a run that resumes from a checkpoint takes exactly the
batches the interrupted one would have taken.

While ``train`` runs, a first SIGINT (Ctrl-C) or SIGTERM makes it save a checkpoint at the end of the
current step and raise ``TrainingInterrupted``; a second one stops at once, as without sbert.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from sbert.atomic import check_replaceable
from sbert.errors import SbertError
from sbert.training import checkpoint as ckpt
from sbert.training.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from sbert.training.schedule import warmup_steps, warmup_then_linear_decay


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
    amp: str = "auto"  # "auto" (bf16/fp16 on CUDA, off on CPU), "bf16", "fp16" or "off"
    progress: bool | None = None  # None: a bar when standard error is a terminal
    keep_checkpoint: bool = False  # keep run_dir/checkpoint.pt (the final state) after a finished run


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
        import shlex

        args = list(argv[1:])
        if "--resume" not in args:
            args.append("--resume")
        return f"{self._headline()}\ngo on from step {self.step:,} with:\n  sbert {shlex.join(args)}"


class _StopOnSignal:
    """While entered (in the main thread): the first SIGINT or SIGTERM is only recorded in ``received``,
    for the loop to stop at the next step boundary; a second one goes to the handler that was there
    before (SIGINT: KeyboardInterrupt at once; SIGTERM: the process ends). Ignored signals stay ignored."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, enabled: bool = True) -> None:
        self.enabled, self.received = enabled, None
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


class Trainer:
    """Fine-tunes ``encoder`` on ``objectives``; saves the best (or final) model to ``out``.

    ``run_dir`` (default ``<out>.train``) holds ``checkpoint.pt`` and ``log.jsonl``.
    """

    def __init__(
        self,
        encoder,
        objectives: Sequence[Objective],
        config: TrainConfig,
        out: str | Path,
        evaluator: Callable | None = None,
        run_dir: str | Path | None = None,
        device: str | None = None,
    ) -> None:
        if not objectives or any(len(o.examples) == 0 for o in objectives):
            raise ValueError("training needs at least one objective, each with at least one example")
        self.encoder, self.objectives, self.config = encoder, list(objectives), config
        self.out = Path(out)
        check_replaceable(self.out)  # a folder of other files is refused now, not after hours of training
        self.run_dir = Path(run_dir) if run_dir else self.out.with_name(self.out.name + ".train")
        self.evaluator = evaluator
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.batches_per_epoch = [math.ceil(len(o.examples) / config.batch_size) for o in self.objectives]
        self.steps_per_epoch = sum(self.batches_per_epoch)
        self.total_steps = config.epochs * self.steps_per_epoch
        if config.max_steps is not None:
            self.total_steps = min(self.total_steps, config.max_steps)
        self.best: float | None = None

    # -- the loop --------------------------------------------------------------------------------------
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
        from tqdm.auto import tqdm

        cfg = self.config
        torch.manual_seed(cfg.seed)
        encoder = self.encoder.to(self.device)
        losses = nn.ModuleList([o.loss for o in self.objectives]).to(self.device)
        params = _unique_params([encoder, losses])
        optimizer = torch.optim.AdamW(
            _param_groups(params, cfg.weight_decay),
            lr=cfg.lr,
            eps=cfg.adam_eps,
            fused=True,  # 5x faster on CPU
        )
        scheduler = warmup_then_linear_decay(optimizer, warmup_steps(self.total_steps, cfg.warmup), self.total_steps)
        autocast, scaler = self._mixed_precision()

        ckpt.collect_checkpoint_leftovers(self.run_dir)  # temporary files of killed checkpoint writes
        start = self._restore(encoder, losses, optimizer, scheduler, scaler) if resume else 0
        if start == 0:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "log.jsonl").write_text("")
        encoder.train()
        losses.train()
        plan, plan_epoch = [], -1
        running = None
        began = time.perf_counter()
        disable = None if cfg.progress is None else not cfg.progress
        with (
            _StopOnSignal(handle_signals) as stop,
            tqdm(total=self.total_steps, initial=start, desc="train", unit="step", disable=disable) as bar,
        ):
            for step in range(start, self.total_steps):
                epoch, index = divmod(step, self.steps_per_epoch)
                if epoch != plan_epoch:
                    plan, plan_epoch = self.epoch_plan(epoch), epoch
                task, rows = plan[index]
                objective = self.objectives[task]
                batch = [objective.examples[r] for r in rows]

                with autocast():
                    loss = objective.loss(encoder, batch)
                scaler.scale(loss).backward()
                if cfg.max_grad_norm:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)

                done, value = step + 1, float(loss.detach())
                running = value if running is None else 0.98 * running + 0.02 * value
                bar.update(1)
                bar.set_postfix(loss=f"{running:.4f}", refresh=False)
                self._log(
                    {
                        "step": done,
                        "epoch": epoch,
                        "objective": objective.name,
                        "loss": value,
                        "lr": scheduler.get_last_lr()[0],
                    }
                )
                if cfg.eval_every and done % cfg.eval_every == 0 and done < self.total_steps:
                    self._evaluate(done, bar)
                if on_step is not None:
                    on_step(done, value)
                due = cfg.checkpoint_every and done % cfg.checkpoint_every == 0 and done < self.total_steps
                if due or stop.received is not None:
                    path = self._checkpoint(done, encoder, losses, optimizer, scheduler, scaler)
                if stop.received is not None:
                    self._log({"step": done, "interrupted": signal.Signals(stop.received).name})
                    raise TrainingInterrupted(stop.received, done, self.total_steps, path)

            elapsed = time.perf_counter() - began  # the training loop alone
            stop.finishing = True
            score = self._evaluate(self.total_steps, bar)
            if self.evaluator is None:
                self.encoder.save(self.out)
            checkpoint = self._finish_checkpoint(encoder, losses, optimizer, scheduler, scaler)
        steps_run = self.total_steps - start
        summary = {
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
        self._log({"summary": summary})
        return summary

    def epoch_plan(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        """(objective index, example rows) for each step of ``epoch``, objectives taken round-robin."""
        size = self.config.batch_size
        queues = []
        for task, objective in enumerate(self.objectives):
            n = len(objective.examples)
            rng = np.random.default_rng([self.config.seed, epoch, task])
            order = rng.permutation(n) if self.config.shuffle else np.arange(n)
            queues.append([order[i : i + size] for i in range(0, n, size)])
        plan = []
        for i in range(max(self.batches_per_epoch)):
            plan += [(task, queue[i]) for task, queue in enumerate(queues) if i < len(queue)]
        return plan

    # -- pieces ----------------------------------------------------------------------------------------
    def _mixed_precision(self):
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
        """Score the dev data; with the training bar shown, the evaluation shows its progress too."""
        if self.evaluator is None:
            return None
        shown = bar is not None and not bar.disable
        if shown:
            bar.set_description_str(f"train: dev evaluation at step {step:,}", refresh=True)
        metrics = _call_evaluator(self.evaluator, self.encoder, shown)
        if shown:
            bar.set_description_str("train", refresh=True)
        primary = self.evaluator.primary
        if primary not in metrics:  # a cross-encoder's STS metrics are named after its scores, not cosine
            primary = primary.replace("cosine", "score")
        score = metrics[primary]
        improved = self.best is None or score > self.best
        if improved:
            self.best = score
            self.encoder.save(self.out)  # keep the best model so far
        self._log({"step": step, "dev": metrics, "primary": primary, "best": improved})
        return score

    def _log(self, row: dict) -> None:
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
        )
        return {
            **{k: cfg[k] for k in keys},
            "objectives": [[o.name, len(o.examples)] for o in self.objectives],
        }

    def _finish_checkpoint(self, encoder, losses, optimizer, scheduler, scaler) -> Path | None:
        """After a finished run: the final state saved (``keep_checkpoint``), or the checkpoint removed."""
        if self.config.keep_checkpoint:
            return self._checkpoint(self.total_steps, encoder, losses, optimizer, scheduler, scaler)
        (self.run_dir / ckpt.FILE).unlink(missing_ok=True)
        return None

    def _checkpoint(self, step, encoder, losses, optimizer, scheduler, scaler) -> Path:
        return save_checkpoint(
            self.run_dir,
            {
                "step": step,
                "fingerprint": json.dumps(self.fingerprint(), sort_keys=True),
                "encoder": encoder.state_dict(),
                "losses": losses.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict(),
                "rng": rng_state(),
                "best": self.best,
            },
        )

    def _restore(self, encoder, losses, optimizer, scheduler, scaler) -> int:
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
        encoder.load_state_dict(state["encoder"])
        losses.load_state_dict(state["losses"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        set_rng_state(state["rng"])
        self.best = state["best"]
        step = int(state["step"])
        self._truncate_log(step)
        return step

    def _refuse_finished_run(self) -> None:
        """--resume of a run that finished (its log ends with the summary, its checkpoint removed)."""
        path = self.run_dir / "log.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        if lines and lines[-1].startswith('{"summary"'):
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


def _call_evaluator(evaluator: Callable, model, show_progress: bool) -> dict[str, float]:
    """``evaluator(model)``, passing ``show_progress`` to evaluators that take it (sbert's do)."""
    try:
        takes = "show_progress" in inspect.signature(evaluator).parameters
    except (TypeError, ValueError):  # a callable without a signature
        takes = False
    return evaluator(model, show_progress=show_progress) if takes else evaluator(model)


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
