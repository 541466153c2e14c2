"""Pictures of embeddings: maps, similarity heatmaps, training curves, retrieval curves.

Each function returns a figure: a matplotlib ``Figure`` (``backend="matplotlib"``, for PNG/SVG/PDF) or a
plotly figure (``backend="plotly"``, for HTML with hover text); ``save(figure, path)`` writes it. The
plotting libraries (``pip install -e '.[plot]'``) load when a picture is made, not at import.
"""

from __future__ import annotations

from sbert.plot.heatmaps import heatmap
from sbert.plot.maps import map
from sbert.plot.output import save
from sbert.plot.projection import project
from sbert.plot.rankings import Rankings, rank, read_rankings, write_rankings
from sbert.plot.retrieval_curves import retrieval
from sbert.plot.training_curves import read_log, training

__all__ = [
    "Rankings",
    "heatmap",
    "map",
    "project",
    "rank",
    "read_log",
    "read_rankings",
    "retrieval",
    "save",
    "training",
    "write_rankings",
]
