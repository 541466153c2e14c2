"""Smart batching (Sentence-BERT §7): sort by length, pad each batch only to its own longest text.

The encoder tokenises a chunk of texts, asks ``batches`` for groups of row indices, pads each group
separately and writes every result back to its original row, so the caller's order is kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np


def batches(lengths: Sequence[int], batch_size: int, sort_by_length: bool = True) -> Iterator[np.ndarray]:
    """Yield arrays of indices into ``lengths``, ``batch_size`` at a time.

    With ``sort_by_length`` the longest texts come first (a memory error then shows at once, not at
    the end), so each batch holds texts of similar length and little padding; else input order.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n = len(lengths)
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable") if sort_by_length else np.arange(n)
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size]


def padding_ratio(lengths: Sequence[int], batch_size: int, sort_by_length: bool = True) -> float:
    """Share of token slots that are padding under this batching: 0 is none, 0.5 is half wasted."""
    lengths = np.asarray(lengths, dtype=np.int64)
    slots = sum(len(b) * int(lengths[b].max()) for b in batches(lengths, batch_size, sort_by_length))
    return 1.0 - float(lengths.sum()) / slots if slots else 0.0
