"""What every picture shares: the model's name in titles, label colours, and short axis labels."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BACKENDS = ("matplotlib", "plotly")
UNCLUSTERED = "no cluster"  # the legend entry of rows a clustering left out (label -1)
# Tableau's 10 colours then their light variants: distinct on screen and in print.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip
GREY = "#b0b0b0"


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")


def model_label(model: Any) -> str:
    """A short name of a model for titles: the shipped name (all-MiniLM-L6-v2), else the folder's name."""
    from sbert.model_names import SHIPPED, canonical_name, resolve

    if model is None:
        return "embeddings given"
    path = getattr(model, "path", None)
    if path is None and not isinstance(model, (str, Path)):
        return type(model).__name__
    name = canonical_name(path if path is not None else model)
    for shipped in SHIPPED:
        try:
            if Path(name).resolve() == resolve(shipped).resolve():
                return shipped
        except Exception:  # a shipped package that is not installed cannot be this model
            continue
    return Path(name).name or name


def short(text: str, width: int = 40) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def escaped(text: object) -> str:
    """``text`` for a plotly text field (legend, hover, title, axis): plotly reads a few HTML tags there (``<a href>``,
    ``<span style>``, ``<br>``), so a label's own ``<``, ``>`` and ``&`` are written as entities: shown, not obeyed."""
    return html.escape(str(text), quote=False)


# Markdown and HTML markup a legend shows as noise: links and images (their text kept), tags, a line's heading,
# quote or list mark, emphasis and code marks (not the underscores inside snake_case words).
_MARKUP = (
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"),
    (re.compile(r"<[^>\n]+>"), ""),
    (re.compile(r"^\s{0,3}(?:#{1,6}|>|[-*+]|\d+[.)])\s+"), ""),
    (re.compile(r"(\*\*|__|~~|`+)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\1(?![\w*])"), r"\2"),
)


def plain(text: str) -> str:
    """``text`` without Markdown or HTML markup (``## **Set-up**: [docs](x.md)`` -> ``Set-up: docs``): a readable
    label made from a text."""
    text = " ".join(str(text).split())
    for pattern, replacement in _MARKUP:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def colours(groups: Sequence[str]) -> dict[str, str]:
    """A colour per group, in order (cycling after 20); the unclustered group is grey."""
    named = [g for g in groups if g != UNCLUSTERED]
    out = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(named)}
    if UNCLUSTERED in groups:
        out[UNCLUSTERED] = GREY
    return out
