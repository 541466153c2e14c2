"""Comparing rankings computed by different code paths, which agree only up to float rounding.

Two computations of one score (another chunking, another processor, float32 against float64) can
differ in the last bits, so rows or pairs whose scores are that close may swap places or trade places at
a cut. These helpers accept exactly that and nothing more.
"""

from __future__ import annotations

import numpy as np


def assert_top_k(scores: np.ndarray, indices: np.ndarray, truth: np.ndarray, atol: float = 1e-5) -> None:
    """``(scores, indices)`` (n, k) is a best-first top-k of the score matrix ``truth`` (n, m) up to ``atol``:
    distinct rows, the scores are those of the rows named, and they are the k best scores in order."""
    assert all(len(set(row)) == len(row) for row in indices.tolist()), "a row is listed twice"
    named = np.take_along_axis(truth, indices, 1)
    np.testing.assert_allclose(scores, named, atol=atol, err_msg="scores are not those of the rows named")
    best = -np.sort(-truth, axis=1)[:, : indices.shape[1]]
    np.testing.assert_allclose(named, best, atol=atol, err_msg="not the best rows, best first")


def assert_same_pairs(a: list, b: list, atol: float = 1e-5) -> None:
    """Two best-first lists of pairs (``score``, ``i``, ``j``) agree up to ``atol``: the scores match place by
    place, a pair in both has the same score in both, and a pair in only one ties with the lists' last."""
    assert len(a) == len(b)
    np.testing.assert_allclose([p.score for p in a], [p.score for p in b], atol=atol)
    in_a, in_b = {(p.i, p.j): p.score for p in a}, {(p.i, p.j): p.score for p in b}
    for pair in in_a.keys() & in_b.keys():
        assert abs(in_a[pair] - in_b[pair]) <= atol, pair
    last = min(a[-1].score, b[-1].score) if a else 0.0
    for pair in in_a.keys() ^ in_b.keys():
        assert in_a.get(pair, in_b.get(pair)) <= last + atol, f"{pair} is in one list only, above the cut"
