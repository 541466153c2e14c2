"""``sbert.plot.map``: a 2-D map of embeddings, one colour per label or cluster, hover text in HTML."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sbert.plot.projection import FEW_FOR_UMAP, NAMES, project, sample_rows
from sbert.plot.style import UNCLUSTERED, check_backend, colours, escaped, model_label, plain, short

CLUSTER_METHODS = ("community", "kmeans", "agglomerative")
LEGEND_MAX = 20  # groups named in the legend; the others are drawn but not listed


@dataclass
class MapData:
    """What a map shows: ``points`` (m, 2) of the ``rows`` (m,) sampled from ``total`` inputs, each
    point's ``group`` (label or cluster) and ``text`` (None when only embeddings were given)."""

    points: np.ndarray
    rows: np.ndarray
    groups: list[str]
    texts: list[str] | None
    total: int
    axes: tuple[str, str]
    title: str
    note: str

    def order(self) -> list[str]:
        """Groups by name (numbers in names compared as numbers), or by size, largest first, when there
        are more than the legend lists; the unclustered last."""
        counts = Counter(self.groups)
        by_name = sorted((g for g in counts if g != UNCLUSTERED), key=_natural)
        named = by_name if len(by_name) <= LEGEND_MAX else sorted(by_name, key=lambda g: -counts[g])
        return named + ([UNCLUSTERED] if UNCLUSTERED in counts else [])


def _natural(name: str) -> list:
    """'cluster 10' after 'cluster 9'."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


def map(
    data: Sequence[str] | Any,
    labels: Sequence[Any] | None = None,
    *,
    texts: Sequence[str] | None = None,
    model: Any = None,
    method: str = "umap",
    clusters: str | None = None,
    cluster_options: Mapping[str, Any] | None = None,
    max_points: int | None = 10_000,
    seed: int = 0,
    backend: str = "matplotlib",
    batch_size: int = 32,
) -> Any:
    """A map of ``data`` projected to 2-D by ``method`` ("umap", "pca", "tsne"). ``data``: texts, embedded
    with ``model`` (default all-MiniLM-L6-v2); or an (n, d) array of embeddings, with ``texts`` for the
    hover text and ``model`` naming their model in the title.

    Colours: ``labels`` (one per input), or ``clusters`` ("community", "kmeans", "agglomerative" of
    ``sbert.cluster``, computed on all inputs, with ``cluster_options`` such as ``k`` or ``threshold``),
    or none. Over ``max_points`` inputs, a random sample of that many (``seed``) is projected and the
    figure says so. ``backend``: "matplotlib" (a ``Figure``, for PNG/SVG) or "plotly" (for HTML).
    """
    check_backend(backend)
    shown = prepare(data, labels, texts, model, method, clusters, cluster_options, max_points, seed, batch_size)
    return draw_matplotlib(shown) if backend == "matplotlib" else draw_plotly(shown)


def _check_labels(labels: Sequence[Any] | None, clusters: str | None, n: int) -> None:
    if labels is not None and clusters is not None:
        raise ValueError("give labels or clusters, not both: a map has one colouring")
    if clusters is not None and clusters not in CLUSTER_METHODS:
        raise ValueError(f"clusters must be one of {', '.join(CLUSTER_METHODS)}; got {clusters!r}")
    if labels is not None and len(labels) != n:
        raise ValueError(f"{len(labels):,} labels for {n:,} points; expected one label per point")


def _inputs(data: Any, texts: Sequence[str] | None) -> tuple[list[str] | None, Any]:
    """(texts, embeddings or None): texts to embed, or embeddings given (with optional texts)."""
    if isinstance(data, str):
        raise TypeError("data must be a list of texts or an (n, d) array of embeddings, not one string")
    if len(data) and isinstance(data[0], str):
        return list(data), None
    if texts is not None and len(texts) != len(data):
        raise ValueError(f"{len(texts):,} texts for {len(data):,} embeddings; expected one text per row")
    return (list(texts) if texts is not None else None), data


def prepare(data, labels, texts, model, method, clusters, cluster_options, max_points, seed, batch_size) -> MapData:
    """Embed (only the sampled texts, unless clusters need them all), colour and project."""
    texts, embeddings = _inputs(data, texts)
    total = len(texts) if embeddings is None else len(embeddings)
    if total == 0:
        raise ValueError("nothing to map: no texts or embeddings given")
    _check_labels(labels, clusters, total)
    rows = sample_rows(total, max_points, seed)
    encoder = None
    if embeddings is None:
        chosen = texts if clusters else [texts[r] for r in rows]
        encoder = encoder_of(model)
        embeddings = encoder.encode(chosen, batch_size=batch_size, on_truncation="ignore", show_progress=False)
        rows_in_embeddings = rows if clusters else np.arange(len(rows))
    else:
        rows_in_embeddings = rows
    embeddings = np.asarray(embeddings.detach().cpu().float() if hasattr(embeddings, "detach") else embeddings)
    groups, colouring = _groups(embeddings, labels, clusters, cluster_options or {}, seed, texts)
    points, axes = project(embeddings[rows_in_embeddings], method, seed)
    return MapData(
        points=points,
        rows=rows,
        groups=[groups[r] for r in rows] if groups is not None else ["all"] * len(rows),
        texts=[texts[r] for r in rows] if texts is not None else None,
        total=total,
        axes=axes,
        title=_title(method, total, texts is not None, encoder if encoder is not None else model),
        note="; ".join(
            filter(None, [colouring, _sample_note(len(rows), total, seed), few_points_note(method, len(rows))])
        ),
    )


def _title(method: str, total: int, has_texts: bool, model: Any) -> str:
    what = f"{NAMES[method]} map of {total:,} {'texts' if has_texts else 'embeddings'}"
    return what if model is None else f"{what} ({model_label(model)})"


def encoder_of(model: Any) -> Any:
    """The encoder to embed texts with: ``model`` itself, or loaded from its name or folder."""
    if model is None or isinstance(model, str) or hasattr(model, "__fspath__"):
        import sbert

        return sbert.load(model or "default")
    return model


def few_points_note(method: str, shown: int) -> str:
    """A warning for a UMAP map of fewer than ``FEW_FOR_UMAP`` points, else ""."""
    if method != "umap" or shown >= FEW_FOR_UMAP:
        return ""
    return f"only {shown} points: a UMAP map means little below ~{FEW_FOR_UMAP} (PCA shows a few points plainly)"


def _sample_note(shown: int, total: int, seed: int) -> str:
    return "" if shown == total else f"random sample of {shown:,} of {total:,} points shown (seed {seed})"


def _groups(embeddings, labels, clusters, options, seed, texts) -> tuple[list[str] | None, str]:
    """Each input's group name (indexed by input row, over all inputs) and how the colours were chosen."""
    if labels is not None:
        return [str(v) for v in labels], "coloured by label"
    if clusters is None:
        return None, ""
    from sbert.search import cluster as clustering

    if clusters == "kmeans":
        found = clustering.kmeans(embeddings, int(options.get("k", 8)), options.get("seed", seed))
        how = f"k-means clusters (k={int(options.get('k', 8))})"
    elif clusters == "agglomerative":
        threshold = options.get("threshold", 0.5)
        found = clustering.agglomerative(embeddings, threshold, options.get("linkage", "average"))
        how = f"agglomerative clusters (threshold {threshold})"
    else:
        threshold, size = options.get("threshold", 0.75), options.get("min_size", 10)
        found = clustering.community_detection(embeddings, threshold, size)
        how = f"community clusters (threshold {threshold}, min size {size})"
    names = cluster_names(found, embeddings, texts)
    return [UNCLUSTERED if c < 0 else names[c] for c in found.tolist()], f"coloured by {how}"


def cluster_names(found: np.ndarray, embeddings: np.ndarray, texts: list[str] | None) -> list[str]:
    """A name per cluster: "cluster N", followed by its most central text (the member most similar to
    the mean of the cluster's unit vectors) when there are texts: what the cluster is about, at a glance."""
    from sbert.plot.projection import unit_rows

    count = int(found.max(initial=-1)) + 1
    if texts is None:
        return [f"cluster {c}" for c in range(count)]
    unit, names = unit_rows(embeddings), []
    for c in range(count):
        members = np.flatnonzero(found == c)
        central = members[int(np.argmax(unit[members] @ unit[members].mean(axis=0)))]
        names.append(f"cluster {c}: {short(plain(texts[central]), 36)}")
    return names


def draw_matplotlib(shown: MapData):
    """A matplotlib ``Figure``: one scatter per group (legend: the largest ``LEGEND_MAX``)."""
    from sbert.plot.figure import new_figure

    fig = new_figure(figsize=(9, 7), layout="constrained")
    ax = fig.add_subplot()
    order, size = shown.order(), float(np.clip(4000 / len(shown.points), 2, 40))
    palette, groups = colours(order), np.asarray(shown.groups)
    for number, group in enumerate(order):
        at = groups == group
        label = group if number < LEGEND_MAX and len(order) > 1 else "_nolegend_"
        xs, ys = shown.points[at].T
        ax.scatter(xs, ys, s=size, c=palette[group], alpha=0.75, linewidths=0, label=label, gid=group)
    if len(order) > 1:
        extra = f" (+{len(order) - LEGEND_MAX} more)" if len(order) > LEGEND_MAX else ""
        ax.legend(
            title=f"{len(order)} groups{extra}",
            fontsize=8,
            markerscale=max(1, 30 / size) ** 0.5,
            loc="upper left",
            bbox_to_anchor=(1.01, 1),
        )
    fig.suptitle(shown.title)
    ax.set_title(shown.note, fontsize=9, color="#555555")
    ax.set_xlabel(shown.axes[0])
    ax.set_ylabel(shown.axes[1])
    return fig


def draw_plotly(shown: MapData):
    """A plotly figure: one trace per group, hover shows the text, its row and its group."""
    import plotly.graph_objects as go

    fig = go.Figure()
    groups, palette = np.asarray(shown.groups), colours(shown.order())
    trace = go.Scattergl if len(shown.points) > 5000 else go.Scatter
    for group in shown.order():
        at = np.flatnonzero(groups == group)
        label = escaped(group)
        hover = [
            f"{escaped(short(shown.texts[i], 200)) if shown.texts else f'row {shown.rows[i]}'}<br><i>{label}</i>"
            for i in at
        ]
        fig.add_trace(
            trace(
                x=shown.points[at, 0],
                y=shown.points[at, 1],
                mode="markers",
                name=escaped(group),
                marker={"color": palette[group], "size": 6 if len(shown.points) < 2000 else 4, "opacity": 0.8},
                hovertext=hover,
                hoverinfo="text",
                customdata=shown.rows[at],
            )
        )
    subtitle = f"<br><sup>{escaped(shown.note)}</sup>" if shown.note else ""
    fig.update_layout(
        title={"text": escaped(shown.title) + subtitle},
        xaxis_title=shown.axes[0],
        yaxis_title=shown.axes[1],
        template="plotly_white",
        showlegend=len(shown.order()) > 1,
    )
    return fig
