"""``sbert.plot.training``: loss, learning rate and dev score against steps, from runs' ``log.jsonl``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sbert.errors import InputFileError
from sbert.plot.style import PALETTE, check_backend, escaped


@dataclass
class RunLog:
    """One run's curves: per objective, (steps, losses); (steps, learning rates); the dev evaluations'
    (steps, scores) of the ``primary`` metric."""

    name: str
    path: Path
    loss: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)
    lr: tuple[list[int], list[float]] = field(default_factory=lambda: ([], []))
    dev: tuple[list[int], list[float]] = field(default_factory=lambda: ([], []))
    primary: str | None = None


def log_path(run_dir: str | Path) -> Path:
    """The ``log.jsonl`` of a run: in the folder, or the file itself, or in ``OUT.train/`` for a model
    folder OUT (where ``sbert train`` puts it)."""
    path = Path(run_dir)
    if path.is_file():
        return path
    if not path.exists():
        raise InputFileError(f"{path}: no such folder; expected a training run folder holding log.jsonl")
    for candidate in (path / "log.jsonl", path.with_name(path.name + ".train") / "log.jsonl"):
        if candidate.is_file():
            return candidate
    raise InputFileError(
        f"{path}: no log.jsonl; expected the run folder `sbert train --out OUT` writes (OUT.train/log.jsonl)"
    )


def _step(row: dict, where: str) -> int:
    if row.get("step") is None:
        raise InputFileError(f"{where}: a loss or dev row without its step")
    return int(row["step"])


def _add(row: dict, run: RunLog, where: str) -> None:
    if "loss" in row:
        step = _step(row, where)
        steps, losses = run.loss.setdefault(str(row.get("objective", "loss")), ([], []))
        steps.append(step)
        losses.append(float(row["loss"]))
        if "lr" in row:
            run.lr[0].append(step)
            run.lr[1].append(float(row["lr"]))
    elif "dev" in row:
        run.primary = row.get("primary") or run.primary
        if not isinstance(row["dev"], dict) or run.primary not in row["dev"]:
            raise InputFileError(f"{where}: a dev row without its primary metric {run.primary!r}")
        run.dev[0].append(_step(row, where))
        run.dev[1].append(float(row["dev"][run.primary]))


def read_log(run_dir: str | Path, name: str | None = None) -> RunLog:
    """The curves of one run from its ``log.jsonl`` (rows ``sbert.training.Trainer`` writes: training
    steps with ``loss`` and ``lr``, dev evaluations with ``dev`` and ``primary``; others are skipped)."""
    path = log_path(run_dir)
    folder = path.parent if path.name == "log.jsonl" else path
    run = RunLog(name or folder.name.removesuffix(".train"), path)
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}: line {number}"
            try:
                row = json.loads(line)
                if isinstance(row, dict):
                    _add(row, run, where)
            except json.JSONDecodeError as err:
                raise InputFileError(f"{where} is not valid JSON ({err.msg})") from err
            except (TypeError, ValueError) as err:
                raise InputFileError(f"{where}: expected numbers for step, loss, lr and dev scores ({err})") from err
    if not run.loss:
        raise InputFileError(f"{path}: no training steps logged (rows with 'step' and 'loss')")
    return run


def training(
    run_dirs: Sequence[str | Path] | str | Path, *, names: Sequence[str] | None = None, backend: str = "matplotlib"
):
    """Loss, learning rate and dev score (the run's primary metric) against steps, one colour per run
    (several runs overlaid), one line per objective of a run with several. ``run_dirs``: run folders
    (``OUT.train``), model folders beside them, or ``log.jsonl`` files; ``names`` label them."""
    check_backend(backend)
    dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs)
    if not dirs:
        raise ValueError("no runs given")
    if names is not None and len(names) != len(dirs):
        raise ValueError(f"{len(names)} names for {len(dirs)} runs")
    runs = [read_log(d, names[i] if names else None) for i, d in enumerate(dirs)]
    title = "Training: " + ", ".join(r.name for r in runs)
    return _plotly(runs, title) if backend == "plotly" else _matplotlib(runs, title)


def _series(runs: list[RunLog]) -> list[tuple[int, str, Any, str, bool]]:
    """(panel, label, (steps, values), colour, dashed) of every curve: 0 loss, 1 learning rate, 2 dev score."""
    out: list[tuple[int, str, Any, str, bool]] = []
    for number, run in enumerate(runs):
        colour = PALETTE[number % len(PALETTE)]
        for part, (objective, curve) in enumerate(run.loss.items()):
            label = run.name if len(run.loss) == 1 else f"{run.name}: {objective}"
            out.append((0, label, curve, colour, part > 0))
        out.append((1, run.name, run.lr, colour, False))
        if run.dev[0]:
            out.append((2, f"{run.name} ({run.primary})", run.dev, colour, False))
    return out


PANELS = ("training loss", "learning rate", "dev score")


def _matplotlib(runs: list[RunLog], title: str):
    from sbert.plot.figure import new_figure

    fig = new_figure(figsize=(15, 4.5), layout="constrained")
    axes = fig.subplots(1, 3)
    for panel, label, (steps, values), colour, dashed in _series(runs):
        marker = "o" if panel == 2 else None
        axes[panel].plot(steps, values, color=colour, label=label, ls="--" if dashed else "-", marker=marker, lw=1.2)
    for ax, name in zip(axes, PANELS, strict=True):
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no dev evaluation logged", ha="center", va="center", transform=ax.transAxes)
    axes[1].ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    fig.suptitle(title)
    return fig


def _plotly(runs: list[RunLog], title: str):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=3, subplot_titles=PANELS)
    for panel, label, (steps, values), colour, dashed in _series(runs):
        line = {"color": colour, "dash": "dash" if dashed else "solid"}
        mode = "lines+markers" if panel == 2 else "lines"
        fig.add_trace(go.Scatter(x=steps, y=values, name=escaped(label), mode=mode, line=line), row=1, col=panel + 1)
    for col in (1, 2, 3):
        fig.update_xaxes(title_text="step", row=1, col=col)
    fig.update_layout(title={"text": escaped(title)}, template="plotly_white")
    return fig
