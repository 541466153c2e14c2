"""``sbert.plot.retrieval``: recall@k curves, and the scores of relevant against non-relevant hits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sbert.plot.rankings import Rankings, read_rankings
from sbert.plot.style import PALETTE, check_backend, escaped

MARKED_K = (1, 10, 100)  # the cutoffs written on the curves


def _results(results: Any) -> list[Rankings]:
    items = [results] if isinstance(results, (Rankings, str, Path)) else list(results)
    if not items:
        raise ValueError("no retrieval results given")
    return [r if isinstance(r, Rankings) else read_rankings(r) for r in items]


def retrieval(results: Any, *, backend: str = "matplotlib", bins: int = 40):
    """Two panels for one or more ``Rankings`` (or rankings JSON files; ``sbert.plot.rankings``): mean
    recall@k against k (1 to the ranking depth, log scale), and the distributions of the scores of the
    retrieved documents that are relevant (solid) and not (dashed), each normalised to area 1."""
    check_backend(backend)
    runs = _results(results)
    title = "Retrieval: " + ", ".join(
        f"{r.name} ({r.model}, {len(r.queries):,} quer{'y' if len(r.queries) == 1 else 'ies'})" for r in runs
    )
    return _plotly(runs, title, bins) if backend == "plotly" else _matplotlib(runs, title, bins)


def curves(run: Rankings) -> tuple[np.ndarray, np.ndarray]:
    """(ks, mean recall@k) for k = 1 .. the deepest ranking."""
    ks = np.arange(1, max(run.depth(), 1) + 1)
    return ks, run.recall_curve(ks)


def _matplotlib(runs: list[Rankings], title: str, bins: int):
    from matplotlib.ticker import ScalarFormatter

    from sbert.plot.figure import new_figure

    fig = new_figure(figsize=(13, 5), layout="constrained")
    left, right = fig.subplots(1, 2)
    for number, run in enumerate(runs):
        colour, label = PALETTE[number % len(PALETTE)], f"{run.name} ({run.model})"
        ks, recall = curves(run)
        left.plot(ks, recall, color=colour, label=label, drawstyle="steps-post")
        for k in (k for k in MARKED_K if k <= ks[-1]):
            left.annotate(f"{recall[k - 1]:.2f}", (k, recall[k - 1]), textcoords="offset points", xytext=(3, -12))
            left.plot([k], [recall[k - 1]], "o", color=colour, ms=4)
        relevant, other = run.scores()
        edges = np.histogram_bin_edges(np.concatenate([relevant, other]), bins=bins)
        for scores, dash, what in ((relevant, "-", "relevant"), (other, "--", "not relevant")):
            if len(scores):
                right.hist(scores, bins=edges, density=True, histtype="step", color=colour, ls=dash, lw=1.5,
                           label=f"{label}: {what} ({len(scores):,})")  # fmt: skip
    left.set(xscale="log", xlabel="k (documents retrieved)", ylabel="mean recall@k", ylim=(0, 1.02))
    left.set_title("recall@k")
    left.xaxis.set_major_formatter(ScalarFormatter())
    right.set(xlabel="score", ylabel="density")
    right.set_title("scores of retrieved documents")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    return fig


def _plotly(runs: list[Rankings], title: str, bins: int):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("recall@k", "scores of retrieved documents"))
    for number, run in enumerate(runs):
        colour, label = PALETTE[number % len(PALETTE)], escaped(f"{run.name} ({run.model})")
        ks, recall = curves(run)
        fig.add_trace(go.Scatter(x=ks, y=recall, name=label, line={"color": colour}, line_shape="hv"), row=1, col=1)
        relevant, other = run.scores()
        edges = np.histogram_bin_edges(np.concatenate([relevant, other]), bins=bins)
        for scores, dash, what in ((relevant, "solid", "relevant"), (other, "dash", "not relevant")):
            density: np.ndarray | list[float] = np.histogram(scores, bins=edges, density=True)[0] if len(scores) else []
            fig.add_trace(
                go.Scatter(x=edges[:-1], y=density, name=f"{label}: {what}", line={"color": colour, "dash": dash},
                           line_shape="hv"),
                row=1, col=2,
            )  # fmt: skip
    fig.update_xaxes(type="log", title_text="k (documents retrieved)", row=1, col=1)
    fig.update_yaxes(title_text="mean recall@k", range=[0, 1.02], row=1, col=1)
    fig.update_xaxes(title_text="score", row=1, col=2)
    fig.update_yaxes(title_text="density", row=1, col=2)
    fig.update_layout(title={"text": escaped(title)}, template="plotly_white")
    return fig
