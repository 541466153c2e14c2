"""Batches that never fight the labels: no text twice in a batch (sentence-transformers'
``NoDuplicatesBatchSampler``).

With in-batch negatives every other row's texts are wrong answers for a row. When two rows share a
text (pairs (dup1, master), (dup2, master): two bug reports that duplicate one master report), one of
them would be scored against its own positive as a negative. ``no_duplicate_batches`` cuts a shuffled
order into batches, deferring a row whose texts (any of them: query, positive, negatives) a batch
already holds to the next batch that has none of them. Every row appears once per epoch; a batch is
shorter only where nothing else fits (the last ones); the order depends only on the order given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np


def example_texts(example: object) -> tuple[str, ...]:
    """The texts of a training example (a dataclass record): its string fields and tuples of strings."""
    if not dataclasses.is_dataclass(example):
        raise TypeError(f"expected a training example record, got {type(example).__name__}")
    texts: list[str] = []
    for f in dataclasses.fields(example):
        value = getattr(example, f.name)
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            texts.extend(value)
    return tuple(texts)


@dataclass(frozen=True)
class Batches:
    """An epoch's batches (rows of the examples, in order) and how many rows were moved to a later batch
    than plain cutting would have put them in."""

    batches: list[np.ndarray]
    moved: int


def no_duplicate_batches(
    order: Sequence[int] | np.ndarray,
    texts: Callable[[int], Iterable[str]],
    batch_size: int,
) -> Batches:
    """Cut ``order`` (row numbers) into batches of at most ``batch_size`` rows, none holding a text twice.

    ``texts(row)`` gives a row's texts. Rows are taken in order; a row that shares a text with the batch
    being filled waits, and the waiting rows (in order) are offered first to each next batch. A row whose
    own texts repeat (a query equal to its positive) is kept: it fights no other row.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = [int(r) for r in order]
    batches, waiting, moved, pos = [], [], set(), 0
    while waiting or pos < len(order):
        batch, seen, skipped = [], set(), []
        offered = iter(waiting)
        while len(batch) < batch_size:
            row = next(offered, None)
            if row is None:
                if pos == len(order):
                    break
                row, pos = order[pos], pos + 1
            own = set(texts(row))
            if seen.isdisjoint(own):
                batch.append(row)
                seen.update(own)
            else:
                skipped.append(row)
                moved.add(row)
        waiting = skipped + list(offered)  # the rows still waiting, in order, and those not offered yet
        batches.append(np.asarray(batch, dtype=np.int64))
    return Batches(batches, len(moved))


def plain_batches(order: Sequence[int] | np.ndarray, batch_size: int) -> Batches:
    """``order`` cut into consecutive batches of ``batch_size`` rows (the last one shorter); nothing moved."""
    order = np.asarray(order, dtype=np.int64)
    return Batches([order[i : i + batch_size] for i in range(0, len(order), batch_size)], 0)


def epoch_batches(
    examples: Sequence[object],
    batch_size: int,
    key: Sequence[int],
    *,
    shuffle: bool = True,
    no_duplicates: bool = True,
) -> Batches:
    """One objective's batches for one epoch, as the trainer cuts them: the rows in an order drawn from
    ``key`` (the trainer's ``(seed, epoch, objective)``; ``shuffle=False``: as given), cut by
    ``no_duplicate_batches`` (``no_duplicates``) or plainly."""
    rng = np.random.default_rng(list(key))
    order = rng.permutation(len(examples)) if shuffle else np.arange(len(examples))
    if no_duplicates:
        return no_duplicate_batches(order, lambda r: example_texts(examples[r]), batch_size)
    return plain_batches(order, batch_size)
