"""The matplotlib figure every PNG/SVG/PDF picture is drawn on: its texts are drawn as written.

Matplotlib reads a pair of ``$`` in a text as mathtext (TeX-like markup): a label "Cost $5 to $10" would be
drawn as "Cost 5to10" in italics, and one like ``$\\foo$`` would fail the drawing. Labels, titles, legends
and tick labels given as strings come from users' files, so mathtext is off for every one of them, whoever
adds it and whenever the figure is drawn (``save``, a notebook, ``savefig``). Only what matplotlib's tick
formatters write themselves (numbers, a log axis's powers of ten, in mathtext) is left to them.
Imported only when a matplotlib picture is made.
"""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import LogFormatter, ScalarFormatter


class PlainTextFigure(Figure):
    """A ``Figure`` that draws its texts as written (``text.parse_math`` off): ``$`` is a dollar sign."""

    def draw(self, renderer: Any) -> None:
        formatted = _formatted_texts(self)
        for text in self.findobj(Text):
            if id(text) not in formatted:
                text.set_parse_math(False)
        super().draw(renderer)


def _formatted_texts(figure: Figure) -> set[int]:
    """The ids of the texts matplotlib writes numbers into, in mathtext where it chooses to: the tick labels of
    its number formatters (linear and log axes) and the axes' offset texts (tick labels given as strings are
    not among them)."""
    ids = set()
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            ids.add(id(axis.offsetText))
            for minor, formatter in ((False, axis.get_major_formatter()), (True, axis.get_minor_formatter())):
                if isinstance(formatter, ScalarFormatter | LogFormatter):
                    ids.update(id(label) for label in axis.get_ticklabels(minor=minor, which="both"))
    return ids


def new_figure(**options: Any) -> PlainTextFigure:
    """A figure for user text (``options`` as ``matplotlib.figure.Figure`` takes them)."""
    return PlainTextFigure(**options)
