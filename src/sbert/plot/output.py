"""Writing a figure to a file, atomically: PNG or SVG from matplotlib, interactive HTML from plotly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sbert.atomic import atomic_file

FORMATS = {".png": "matplotlib", ".svg": "matplotlib", ".pdf": "matplotlib", ".html": "plotly"}


def backend_for(path: str | Path) -> str:
    """The plotting library a file needs: matplotlib for .png/.svg/.pdf, plotly for .html."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(
            f"{path}: unknown picture format {suffix or '(none)'!r}; expected .png, .svg, .pdf (matplotlib) "
            "or .html (plotly, interactive, with hover text)"
        )
    return FORMATS[suffix]


def save(figure: Any, path: str | Path, dpi: int = 150) -> Path:
    """Write ``figure`` to ``path`` (format from the extension) atomically; returns the path.

    A matplotlib ``Figure`` goes to .png/.svg/.pdf (``dpi`` for PNG); a plotly figure to .html, with
    plotly.js inside the file so that it opens without a network."""
    path = Path(path)
    wanted = backend_for(path)
    is_plotly = hasattr(figure, "to_html")
    if (wanted == "plotly") != is_plotly:
        made = "plotly" if is_plotly else "matplotlib"
        raise ValueError(f"{path}: a {path.suffix} file needs a {wanted} figure (backend={wanted!r}); got a {made} one")
    if is_plotly:
        with atomic_file(path, "w", encoding="utf-8") as handle:
            handle.write(figure.to_html(include_plotlyjs=True, full_html=True))
    else:
        with atomic_file(path, "wb") as handle:
            figure.savefig(handle, format=path.suffix[1:].lower(), dpi=dpi, bbox_inches="tight")
    return path
