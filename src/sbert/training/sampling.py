"""Batches that never fight the labels: no text twice in a batch (sentence-transformers'
``NoDuplicatesBatchSampler``).

With in-batch negatives every other row's texts are wrong answers for a row. When two rows share a
text (pairs (dup1, master), (dup2, master): two bug reports that duplicate one master report), one of
them would be scored against its own positive as a negative. ``no_duplicate_batches`` cuts a shuffled
order into batches, deferring a row whose texts (any of them: query, positive, negatives) a batch
already holds to the next batch that has none of them. Every row appears once per epoch; a batch is
shorter only where nothing else fits (the last ones); the order depends only on the order given. It takes
time linear in the rows, however many of them share a text.
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

    ``texts(row)`` gives a row's texts (asked once a row). Rows are taken in order; a row that shares a text
    with the batch being filled waits, and the waiting rows (in order) are offered first to each next batch.
    A row whose own texts repeat (a query equal to its positive) is kept: it fights no other row.

    Put another way, each row goes, in order, to the earliest batch that has room and none of its texts
    (a new batch where none has), which is how it is computed: each text keeps the earliest batch that may
    still take it, which only moves forward, so rows that all share one text (a corpus of copies) cost
    linear time, not a scan of every waiting row per batch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    batches: list[list[int]] = []
    held: list[set[str]] = []  # each batch's texts
    first_open = 0  # every batch before it is full
    earliest: dict[str, int] = {}  # a text: every batch before this one is full or holds the text
    moved = 0
    for row in (int(r) for r in order):
        own = set(texts(row))
        while first_open < len(batches) and len(batches[first_open]) == batch_size:
            first_open += 1
        at = first_open
        for text in own:
            free = max(earliest.get(text, first_open), first_open)
            while free < len(batches) and (len(batches[free]) == batch_size or text in held[free]):
                free += 1
            earliest[text] = free
            at = max(at, free)
        while at < len(batches) and (len(batches[at]) == batch_size or not held[at].isdisjoint(own)):
            at += 1  # free of each text alone, not of all of them together
        if at == len(batches):
            batches.append([])
            held.append(set())
        batches[at].append(row)
        held[at].update(own)
        moved += at != first_open  # plain cutting order would have put it in the first batch with room
    return Batches([np.asarray(batch, dtype=np.int64) for batch in batches], moved)


def any_fit_together(examples: Sequence[object]) -> bool:
    """Whether any two of ``examples`` share no text, i.e. whether ``no_duplicate_batches`` can put two rows in
    one batch. Where none can, every batch holds one row and an in-batch-negatives loss has nothing to learn
    (no other row to be a negative): a corpus of one text repeated."""
    cut = no_duplicate_batches(range(len(examples)), lambda r: example_texts(examples[r]), 2)
    return any(len(batch) > 1 for batch in cut.batches)


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
