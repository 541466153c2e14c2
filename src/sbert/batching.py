"""Smart batching (Sentence-BERT §7): sort by length, pad each batch only to its own longest text.

The encoder tokenises a chunk of texts, asks ``batches`` for groups of row indices, pads each group
separately and writes every result back to its original row, so the caller's order is kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np


def batches(
    lengths: Sequence[int] | np.ndarray,
    batch_size: int,
    sort_by_length: bool = True,
    max_tokens: int | None = None,
    packed: bool = False,
) -> Iterator[np.ndarray]:
    """Yield arrays of indices into ``lengths``, at most ``batch_size`` at a time.

    With ``sort_by_length`` the longest texts come first (a memory error then shows at once, not at
    the end), so each batch holds texts of similar length and little padding; else input order.
    ``max_tokens`` also caps each batch's padded size (rows x longest row): long texts then come in
    small batches and short ones in large batches (never fewer than one text per batch). With
    ``packed`` (batches that ``pack_rows`` lays end to end, no padding) it caps the real tokens.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    sizes = np.asarray(lengths, dtype=np.int64)
    n = len(sizes)
    order = np.argsort(-sizes, kind="stable") if sort_by_length else np.arange(n)
    if max_tokens is None:
        for start in range(0, n, batch_size):
            yield order[start : start + batch_size]
        return
    start, longest = 0, 0
    total = 0
    for end in range(n):
        size = int(sizes[order[end]])
        longest_with, total_with = max(longest, size), total + size
        cost = total_with if packed else (end - start + 1) * longest_with
        if end > start and (cost > max_tokens or end - start == batch_size):
            yield order[start:end]
            start, longest_with, total_with = end, size, size
        longest, total = longest_with, total_with
    if start < n:
        yield order[start:]


def pack_rows(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Group indices into rows whose lengths sum to at most ``width`` (first fit, longest first).

    Used to run a batch without padding: each row holds several texts end to end, and attention is
    kept within each text (see ``Transformer.collate_packed``). A text longer than ``width`` is an error.
    """
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda k: -int(lengths[k])):
        size = int(lengths[i])
        if size > width:
            raise ValueError(f"a text of {size} tokens does not fit in packed rows of {width}")
        for r, free in enumerate(room):
            if size <= free:
                rows[r].append(i)
                room[r] -= size
                break
        else:
            rows.append([i])
            room.append(width - size)
    return rows


def padding_ratio(lengths: Sequence[int] | np.ndarray, batch_size: int, sort_by_length: bool = True) -> float:
    """Share of token slots that are padding under this batching: 0 is none, 0.5 is half wasted."""
    sizes = np.asarray(lengths, dtype=np.int64)
    slots = sum(len(b) * int(sizes[b].max()) for b in batches(sizes, batch_size, sort_by_length))
    return 1.0 - float(sizes.sum()) / slots if slots else 0.0
