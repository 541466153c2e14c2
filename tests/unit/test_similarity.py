"""Similarity functions against hand-computed values, numpy and torch alike."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sbert import similarity as sim

A = np.array([[3.0, 4.0], [1.0, 0.0]], dtype=np.float32)
B = np.array([[0.0, 2.0], [1.0, 1.0], [-3.0, -4.0]], dtype=np.float32)


def test_cosine_matrix():
    expected = np.array([[0.8, 7 / (5 * np.sqrt(2)), -1.0], [0.0, 1 / np.sqrt(2), -0.6]])
    np.testing.assert_allclose(sim.cosine(A, B), expected, rtol=1e-6, atol=1e-6)


def test_dot_matrix():
    np.testing.assert_allclose(sim.dot(A, B), [[8, 7, -25], [0, 1, -3]])


def test_euclidean_is_negative_distance():
    expected = -np.array([[np.sqrt(9 + 4), np.sqrt(4 + 9), 10.0], [np.sqrt(1 + 4), 1.0, np.sqrt(16 + 16)]])
    np.testing.assert_allclose(sim.euclidean(A, B), expected, rtol=1e-6)


def test_manhattan_is_negative_l1():
    np.testing.assert_allclose(sim.manhattan(A, B), -np.array([[5, 5, 14], [3, 1, 8]]), rtol=1e-6)


def test_pairwise_forms_compare_row_i_with_row_i():
    b = B[:2]
    np.testing.assert_allclose(sim.pairwise_cosine(A, b), [0.8, 1 / np.sqrt(2)], rtol=1e-6)
    np.testing.assert_allclose(sim.pairwise_dot(A, b), [8, 1])
    np.testing.assert_allclose(sim.pairwise_euclidean(A, b), [-np.sqrt(13), -1.0], rtol=1e-6)
    np.testing.assert_allclose(sim.pairwise_manhattan(A, b), [-5, -1])


def test_type_follows_input_and_1d_counts_as_row():
    out = sim.cosine(torch.from_numpy(A), torch.from_numpy(B))
    assert isinstance(out, torch.Tensor) and out.shape == (2, 3)
    assert isinstance(sim.cosine(A, B), np.ndarray)
    assert sim.cosine(A[0], B).shape == (1, 3)


def test_shape_errors_are_specific():
    with pytest.raises(ValueError, match="widths differ"):
        sim.cosine(A, np.ones((2, 3)))
    with pytest.raises(ValueError, match="same number of rows"):
        sim.pairwise_cosine(A, B)
    with pytest.raises(ValueError, match="unknown similarity"):
        sim.get("jaccard")
