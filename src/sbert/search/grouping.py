"""Rows grouped into documents: the one place where windows become documents (MaxP or mean).

A document is scored by its best window (``maxp``) or by the mean of its windows' vectors (``mean``, unit
length for cosine); its best passage is its window closest to the query (ties: the lower row). Used by the
indexes (``sbert.search.index.query``) and by ``sbert.windows.rank_documents``.
"""

from __future__ import annotations

import re
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


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+|\n\s*")
READABLE_SHARE = 1 / 3  # a shown passage may skip at most this share of its window to start a sentence


def readable_start(passage: str, before: str | None) -> int:
    """Where a window cut from inside a document is shown from: after the first sentence end in its first
    third (``READABLE_SHARE``), else at its first whole word. ``before``: the document's character just before
    the window ("" at the document's start: shown whole; None: unknown, so a word-initial start is assumed cut)."""
    if before == "" or not passage:
        return 0
    found = _SENTENCE_END.search(passage, 0, max(1, int(len(passage) * READABLE_SHARE)))
    if found and found.end() < len(passage):
        return found.end()
    cut_word = passage[0].isalnum() and (before is None or before.isalnum())
    start = 0
    if cut_word:
        space = re.search(r"\s+", passage)
        start = space.end() if space and space.end() < len(passage) else 0
    return start + len(passage[start:]) - len(passage[start:].lstrip())


def readable_passage(
    texts: Sequence[str | None], spans: Sequence[tuple[int, int] | None], docs: Sequence[str | None], row: int
) -> tuple[str | None, tuple[int, int] | None]:
    """Window ``row``'s passage and span as a hit shows them: starting at a sentence or word boundary
    (``readable_start``; the character before it is read from the previous window of the same document)."""
    text, span = texts[row], spans[row]
    if text is None or span is None:
        return text, span
    before: str | None = "" if span[0] == 0 else None
    prev = row - 1
    if before is None and prev >= 0 and docs[prev] == docs[row] and spans[prev] and texts[prev] is not None:
        a, b = spans[prev]
        if a < span[0] <= b and 0 <= span[0] - 1 - a < len(texts[prev]):
            before = texts[prev][span[0] - 1 - a]
    cut = readable_start(text, before)
    return text[cut:], (span[0] + cut, span[1])
