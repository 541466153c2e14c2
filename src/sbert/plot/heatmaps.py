"""``sbert.plot.heatmap``: the cosine similarity matrix of a few texts, texts on the axes, values in the cells."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sbert.plot.style import check_backend, escaped, model_label, short

MAX_TEXTS = 60  # beyond this the cells are too small to read


def similarity_matrix(texts: Sequence[str], model: Any = None, batch_size: int = 32) -> np.ndarray:
    """(n, n) cosine similarity of the texts' embeddings (``sbert.similarity.cosine``)."""
    from sbert.plot.maps import encoder_of
    from sbert.similarity import cosine

    encoder = encoder_of(model)
    embeddings = encoder.encode(list(texts), batch_size=batch_size, on_truncation="ignore", show_progress=False)
    return np.asarray(cosine(embeddings, embeddings), dtype=np.float64)


def heatmap(
    texts: Sequence[str],
    *,
    model: Any = None,
    matrix: Any = None,
    backend: str = "matplotlib",
    width: int = 40,
    batch_size: int = 32,
) -> Any:
    """The similarity heatmap of ``texts`` (2 to 60), embedded with ``model`` (default all-MiniLM-L6-v2),
    or of a given (n, n) ``matrix``. Axis labels are the texts cut to ``width`` characters; each cell
    shows its value to two decimals (the HTML's hover shows the full texts and more digits).
    ``backend``: "matplotlib" (a ``Figure``) or "plotly"."""
    check_backend(backend)
    texts = [str(t) for t in texts]
    if not 2 <= len(texts) <= MAX_TEXTS:
        raise ValueError(f"a heatmap needs 2 to {MAX_TEXTS} texts; got {len(texts)}")
    if matrix is None:
        from sbert.plot.maps import encoder_of

        model = encoder_of(model)
        matrix = similarity_matrix(texts, model, batch_size)
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.shape != (len(texts), len(texts)):
        raise ValueError(
            f"matrix of shape {matrix.shape} for {len(texts)} texts; expected ({len(texts)}, {len(texts)})"
        )
    title = f"Cosine similarity of {len(texts)} texts ({model_label(model)})"
    labels = [f"{i + 1}. {short(t, width)}" for i, t in enumerate(texts)]
    if backend == "plotly":
        return _plotly(matrix, texts, labels, title)
    return _matplotlib(matrix, labels, title)


def _matplotlib(matrix: np.ndarray, labels: list[str], title: str):
    from sbert.plot.figure import new_figure

    n = len(labels)
    side = 2.5 + 0.55 * n
    fig = new_figure(figsize=(side + 2.5, side), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(matrix, cmap="viridis", vmin=min(0.0, float(matrix.min())), vmax=1.0)
    fig.colorbar(image, ax=ax, shrink=0.8, label="cosine similarity")
    ax.set_xticks(range(n), [str(i + 1) for i in range(n)])
    ax.set_yticks(range(n), labels)
    ax.set_xlabel("text (numbered as on the left)")
    fontsize = 9 if n <= 12 else 7 if n <= 25 else 5
    middle = (float(matrix.min()) + 1.0) / 2
    for (row, col), value in np.ndenumerate(matrix):
        colour = "black" if value > middle else "white"
        ax.text(col, row, f"{value:.2f}", ha="center", va="center", color=colour, fontsize=fontsize)
    ax.set_title(title)
    return fig


def _plotly(matrix: np.ndarray, texts: list[str], labels: list[str], title: str):
    import plotly.graph_objects as go

    full, labels = [escaped(short(t, 300)) for t in texts], [escaped(label) for label in labels]
    hover = [
        [f"{full[r]}<br>{full[c]}<br>cosine {matrix[r, c]:.4f}" for c in range(len(texts))] for r in range(len(texts))
    ]
    fig = go.Figure(
        go.Heatmap(
            z=matrix,
            x=labels,
            y=labels,
            text=np.round(matrix, 2),
            texttemplate="%{text:.2f}",
            hovertext=hover,
            hoverinfo="text",
            colorscale="Viridis",
            zmax=1.0,
            colorbar={"title": {"text": "cosine"}},
        )
    )
    fig.update_layout(title={"text": escaped(title)}, template="plotly_white", yaxis={"autorange": "reversed"})
    return fig
