"""Hybrid search: BM25 (bm25s) scores checked by hand, reciprocal rank fusion and the weighted sum of
min-max normalised scores on tiny cases, persistence, and the fused search."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from sbert.errors import IndexFormatError
from sbert.search.exact import TopK
from sbert.search.fusion import fuse, hybrid_search, minmax, reciprocal_rank_fusion, weighted_fusion

pytest.importorskip("bm25s")
from sbert.search.lexical import BM25, tokenize

CORPUS = ["The cat sat on the mat", "Dogs bark at the cat and the cat runs", "An empty kitchen", "Dogs bark loudly"]


def _top(scores, rows) -> TopK:
    return TopK(np.asarray(scores, dtype=np.float32), np.asarray(rows, dtype=np.int64))


# -- BM25 ------------------------------------------------------------------------------------------------
def test_bm25_scores_are_lucenes_formula_by_hand():
    bm25 = BM25.build(CORPUS)
    assert tokenize(CORPUS[:1]) == [["cat", "sat", "mat"]]  # lower-cased, stop words gone
    lengths = [3, 5, 2, 3]  # "dogs bark cat cat runs": "at", "the", "and" are stop words
    assert [len(t) for t in tokenize(CORPUS)] == lengths
    avg = sum(lengths) / 4

    def term(tf: int, df: int, length: int) -> float:
        idf = math.log(1 + (4 - df + 0.5) / (df + 0.5))
        return idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * length / avg))

    expected = [term(1, 2, 3), term(2, 2, 5), 0.0, 0.0]
    assert bm25.scores("cat").tolist() == pytest.approx(expected, rel=1e-5)
    both = [term(1, 2, 3), term(2, 2, 5) + term(1, 2, 5), 0.0, term(1, 2, 3)]
    assert bm25.scores("a cat that BARKS?").tolist() != both  # "barks" is not "bark": no stemming
    assert bm25.scores("cat bark").tolist() == pytest.approx(both, rel=1e-5)


def test_bm25_search_ranks_best_first_and_leaves_out_rows_without_a_shared_word():
    bm25 = BM25.build(CORPUS)
    found = bm25.search(["cat", "bark", "zebra", "the"], k=3)
    assert found.indices.tolist() == [[1, 0, -1], [3, 1, -1], [-1, -1, -1], [-1, -1, -1]]
    assert np.isneginf(found.scores[0, 2]) and found.scores[0, 0] > found.scores[0, 1] > 0
    # equal scores: lower row first; excluded (deleted) rows never come back
    twins = BM25.build(["red apple", "red apple", "green"])
    assert twins.search(["apple"], 2).indices.tolist() == [[0, 1]]
    assert twins.search(["apple"], 2, exclude=np.array([0])).indices.tolist() == [[1, -1]]


def test_bm25_round_trips_through_bytes_and_a_file(tmp_path):
    bm25 = BM25.build(CORPUS)
    again = BM25.from_bytes(bm25.to_bytes(), "here", rows=4)
    assert again.scores("cat bark").tolist() == bm25.scores("cat bark").tolist()
    bm25.save(tmp_path / "bm25.zip")
    assert BM25.load(tmp_path / "bm25.zip").search(["dogs"], 2).indices.tolist() == [[3, 1]]
    empty = BM25.from_bytes(BM25.build([]).to_bytes(), "here")
    assert empty.rows == 0 and empty.search(["cat"], 2).indices.tolist() == [[-1]]  # k cut to the rows (at least 1)


def test_damaged_bm25_data_names_its_source(tmp_path):
    file = tmp_path / "bm25.zip"
    file.write_bytes(b"garbage")
    with pytest.raises(IndexFormatError, match=r"bm25\.zip: not a readable BM25 index"):
        BM25.load(file)
    with pytest.raises(IndexFormatError, match="holds 4 BM25 rows; 5 expected"):
        BM25.from_bytes(BM25.build(CORPUS).to_bytes(), file, rows=5)


# -- fusion ----------------------------------------------------------------------------------------------
def test_reciprocal_rank_fusion_by_hand():
    dense = _top([[0.9, 0.8, 0.1]], [[3, 1, 0]])
    lexical = _top([[12.0, 7.0, -np.inf]], [[1, 2, -1]])
    found = reciprocal_rank_fusion([dense, lexical], k=4, rrf_k=60)
    assert found.indices.tolist() == [[1, 3, 2, 0]]
    assert found.scores[0].tolist() == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63])
    assert reciprocal_rank_fusion([dense, lexical], k=1, rrf_k=0).indices.tolist() == [[1]]  # 1/2 + 1/1


def test_fusion_ties_come_by_row_and_short_results_are_padded():
    a, b = _top([[1.0, 0.5]], [[7, 2]]), _top([[3.0, 1.0]], [[2, 7]])  # rows 2 and 7 tie on both fusions
    assert reciprocal_rank_fusion([a, b], k=3).indices.tolist() == [[2, 7, -1]]
    assert np.isneginf(reciprocal_rank_fusion([a, b], k=3).scores[0, 2])
    assert weighted_fusion(a, b, k=2, alpha=0.5).indices.tolist() == [[2, 7]]


def test_minmax_maps_each_row_best_to_one_and_worst_to_zero():
    scores = np.array([[4.0, 3.0, 2.0], [5.0, 5.0, -np.inf]])
    assert minmax(scores).tolist() == [[1.0, 0.5, 0.0], [1.0, 1.0, -np.inf]]


def test_weighted_fusion_by_hand():
    dense = _top([[0.9, 0.7, 0.5]], [[0, 1, 2]])  # normalised 1, 0.5, 0
    lexical = _top([[10.0, 4.0, 2.0]], [[2, 3, 1]])  # normalised 1, 0.25, 0
    found = weighted_fusion(dense, lexical, k=4, alpha=0.75)
    assert found.indices.tolist() == [[0, 1, 2, 3]]
    assert found.scores[0].tolist() == pytest.approx([0.75, 0.375, 0.25, 0.0625])
    assert weighted_fusion(dense, lexical, k=1, alpha=0.0).indices.tolist() == [[2]]  # BM25 alone
    assert weighted_fusion(dense, lexical, k=1, alpha=1.0).indices.tolist() == [[0]]  # dense alone


def test_fusion_settings_are_checked():
    a = _top([[1.0]], [[0]])
    with pytest.raises(ValueError, match="fusion must be one of rrf, weighted"):
        fuse(a, a, 1, fusion="sum")
    with pytest.raises(ValueError, match="alpha must be from 0 to 1"):
        fuse(a, a, 1, fusion="weighted", alpha=1.5)
    with pytest.raises(ValueError, match="k must be at least 1"):
        fuse(a, a, 0)


def test_hybrid_search_fuses_dense_and_bm25_candidates():
    vectors = np.array([[1, 0], [0.6, 0.8], [0, 1], [0.8, 0.6]], dtype=np.float32)
    query = np.array([[0, 1]], dtype=np.float32)  # dense order: 2, 1, 3, 0
    bm25 = BM25.build(CORPUS)  # "dogs": rows 3, 1
    found = hybrid_search(["dogs"], query, vectors, bm25, k=4, fusion="rrf", candidates=4)
    rrf = {2: 1 / 61, 1: 1 / 62 + 1 / 62, 3: 1 / 63 + 1 / 61, 0: 1 / 64}
    assert found.indices.tolist() == [sorted(rrf, key=lambda r: -rrf[r])]
    assert found.scores[0].tolist() == pytest.approx(sorted(rrf.values(), reverse=True))
    weighted = hybrid_search(["dogs"], query, vectors, bm25, k=1, fusion="weighted", alpha=0.0)
    assert weighted.indices.tolist() == [[3]]
    with pytest.raises(ValueError, match="BM25 index holds 4 rows, the corpus 2"):
        hybrid_search(["dogs"], query, vectors[:2], bm25)


def test_bm25s_is_imported_without_letting_jax_reserve_a_gpu(monkeypatch):
    """Where JAX is installed, importing bm25s starts JAX, which reserves 75% of a GPU up front unless told
    not to: sbert tells it not to, and leaves a choice the user made alone."""
    from sbert.search.lexical import _bm25s

    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    _bm25s()
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    _bm25s()
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
