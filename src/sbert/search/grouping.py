"""Rows grouped into documents: the one place where windows become documents (MaxP or mean).

A document is scored by its best window (``maxp``) or by the mean of its windows' vectors (``mean``, unit
length for cosine); its best passage is its window closest to the query (ties: the lower row). Used by the
indexes (``sbert.search.index_search``) and by ``sbert.documents.rank_documents``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sbert.search import ranking

MODES = ("maxp", "mean")
DEFAULT_MODE: Literal["maxp", "mean"] = "maxp"  # measured: benchmarks/results/retrieval.md (full collections)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0, 1, norms)


@dataclass(frozen=True)
class Groups:
    """The live documents of a set of rows: ``names`` (each document's key, in the order of its first live
    row), ``of_row`` (each row's document number, -1 where the row is not live) and ``rows`` (each
    document's live rows, ascending)."""

    names: list
    of_row: np.ndarray
    rows: list[np.ndarray]

    @classmethod
    def of(cls, docs: Sequence[Hashable], alive: np.ndarray | None = None) -> Groups:
        """Groups of rows by ``docs`` (each row's document), over the rows ``alive`` marks (default: all)."""
        live = np.ones(len(docs), dtype=bool) if alive is None else alive
        number: dict = {}
        of_row = np.full(len(docs), -1, dtype=np.int64)
        for row in np.flatnonzero(live).tolist():
            of_row[row] = number.setdefault(docs[row], len(number))
        order = np.argsort(of_row, kind="stable")
        bounds = np.searchsorted(of_row[order], np.arange(len(number) + 1))
        return cls(list(number), of_row, [order[bounds[g] : bounds[g + 1]] for g in range(len(number))])

    def best(self, row_scores: np.ndarray) -> np.ndarray:
        """Each document's best row score (``maxp``): (n, n_rows) -> (n, n_documents)."""
        if not self.rows:
            return np.zeros((len(row_scores), 0), dtype=row_scores.dtype)
        order = np.concatenate(self.rows)
        starts = np.cumsum([0, *[len(r) for r in self.rows[:-1]]])
        return np.maximum.reduceat(row_scores[:, order], starts, axis=1)

    def means(self, vectors: np.ndarray, cosine: bool = True) -> np.ndarray:
        """(n_documents, dim) float32: each document's mean row vector (unit length for ``cosine``)."""
        if not self.rows:
            return np.zeros((0, vectors.shape[1]), dtype=np.float32)
        means = np.stack([vectors[rows].astype(np.float64).mean(axis=0) for rows in self.rows])
        return (unit(means) if cosine else means).astype(np.float32)

    def best_row(self, group: int, scores: np.ndarray) -> int:
        """Document ``group``'s row with the best score (its best passage; ties: the lower row); ``scores``:
        those of its rows (``rows[group]``), in that order."""
        rows = self.rows[group]
        return int(rows[ranking.order(scores, rows)[0]])
