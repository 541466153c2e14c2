"""Smart batching: longest first, every index exactly once, less padding than input order."""

from __future__ import annotations

import numpy as np
import pytest

from sbert.batching import batches, padding_ratio


def test_sorted_batches_cover_every_index_once_longest_first():
    lengths = [3, 9, 1, 7, 7, 2, 5]
    groups = list(batches(lengths, 3))
    assert [len(g) for g in groups] == [3, 3, 1]
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))
    assert [lengths[i] for i in np.concatenate(groups)] == sorted(lengths, reverse=True)


def test_unsorted_keeps_input_order():
    assert np.concatenate(list(batches([3, 9, 1], 2, sort_by_length=False))).tolist() == [0, 1, 2]


def test_sorting_reduces_padding():
    lengths = [1, 50, 2, 49, 3, 48]
    assert padding_ratio(lengths, 2) < padding_ratio(lengths, 2, sort_by_length=False)
    assert padding_ratio([4, 4, 4], 3) == 0.0


def test_bad_batch_size():
    with pytest.raises(ValueError, match="batch_size"):
        list(batches([1, 2], 0))
