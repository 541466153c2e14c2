"""Best first: the one order of every ranking in sbert (search, the index, mining, re-ranking, the cross-encoder).

Entries come by score descending, then by id ascending (a corpus row, a pair's rows, a position), so
equal scores always come in the same order. Scores are compared exactly: an order that treated close
scores as equal would not be transitive, and would depend on what else is being sorted.

Last-bit float noise is handled before the cut instead: two computations of one score (another
chunking, another processor) can differ by float32 rounding, so ``band`` keeps every candidate within
``BAND`` of a cut, and the caller re-scores those pair by pair in float64 (``sbert.search.exact``)
before the final ``top``. Only candidates whose true scores are within rounding of the cut can then
trade places between processors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

BAND = 1e-5  # float32 scores this close to a cut (x max(1, |score at the cut|)) may belong on either side
_LAST = np.iinfo(np.int64).max


def order(scores: np.ndarray, *ids: np.ndarray) -> np.ndarray:
    """Positions that put ``scores`` best first along the last axis: score descending, then each of
    ``ids`` ascending (the first one decides first); with no ``ids``, equal scores keep their positions."""
    if not ids:
        return np.argsort(-scores, axis=-1, kind="stable")
    return np.lexsort((*reversed(ids), -scores), axis=-1)


def top(scores: np.ndarray, ids: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best ``k`` (all by default) as (scores, ids), best first. Negative ids mark missing
    entries (padding): they come last, with score -inf."""
    missing = ids < 0
    if missing.any():
        scores = np.where(missing, -np.inf, scores)
        keys = np.where(missing, _LAST, ids)
    else:
        keys = ids
    pick = order(scores, keys)[..., :k]
    return np.take_along_axis(scores, pick, -1), np.take_along_axis(ids, pick, -1)


def floor(cut: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """The lowest score that may still belong above a cut at score ``cut``: rounding could put a true
    score anywhere in the band of ``BAND x max(1, |cut|)`` below it."""
    scale = np.maximum(np.abs(cut), 1.0) if isinstance(cut, np.ndarray) else cut.abs().clamp(min=1.0)
    return cut - BAND * scale


def band(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best ``k`` and every candidate in the band below its ``k``-th (``floor``), best first,
    as many columns as the widest row needs: what to re-score before cutting at ``k``."""
    scores, ids = top(scores, ids)
    if scores.shape[1] <= k:
        return scores, ids
    width = max(k, int((scores >= floor(scores[:, k - 1 : k])).sum(axis=1).max()))
    return scores[:, :width], ids[:, :width]
