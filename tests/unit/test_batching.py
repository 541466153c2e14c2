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


def test_token_budget_by_hand():
    lengths = [5, 50, 3, 20, 20, 7, 1]
    # sorted: 50, 20, 20, 7, 5, 3, 1; 50 alone (2 x 50 > 60); 3 x 20 = 60 fits, then the count cap of 3
    assert [b.tolist() for b in batches(lengths, 3, True, max_tokens=60)] == [[1], [3, 4, 5], [0, 2, 6]]
    # input order: the running longest row decides
    assert [b.tolist() for b in batches(lengths, 10, False, max_tokens=60)] == [[0], [1], [2, 3, 4], [5, 6]]
    # a text longer than the budget still gets a batch of its own
    assert [b.tolist() for b in batches([100, 2], 8, True, max_tokens=10)] == [[0], [1]]
    with pytest.raises(ValueError, match="max_tokens"):
        list(batches(lengths, 3, True, max_tokens=0))


def test_encode_with_token_budget_equals_count_batches(model, stsb_sentences):
    texts = stsb_sentences[:120]
    np.testing.assert_allclose(
        model.encode(texts, batch_size=512, max_tokens=300), model.encode(texts, batch_size=16), atol=1e-5
    )
