"""Exact top-k search and paraphrase mining against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from sbert.search import paraphrase_mining, semantic_search


def brute_top_k(q: np.ndarray, c: np.ndarray, k: int, cosine: bool = True):
    if cosine:
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        c = c / np.linalg.norm(c, axis=1, keepdims=True)
    scores = q.astype(np.float64) @ c.T.astype(np.float64)
    order = np.lexsort((np.broadcast_to(np.arange(len(c)), scores.shape), -scores), axis=-1)[:, :k]
    return np.take_along_axis(scores, order, 1), order


@pytest.mark.parametrize("query_chunk, corpus_chunk", [(1, 1), (7, 97), (1000, 1000), (3, 1003)])
def test_semantic_search_equals_brute_force_with_odd_chunks(query_chunk, corpus_chunk):
    rng = np.random.default_rng(0)
    corpus, queries = rng.normal(size=(1003, 24)).astype(np.float32), rng.normal(size=(37, 24)).astype(np.float32)
    found = semantic_search(queries, corpus, 11, query_chunk_size=query_chunk, corpus_chunk_size=corpus_chunk)
    scores, indices = brute_top_k(queries, corpus, 11)
    assert found.indices.shape == (37, 11) and found.scores.dtype == np.float32
    np.testing.assert_array_equal(found.indices, indices)
    np.testing.assert_allclose(found.scores, scores, atol=1e-6)


def test_ties_are_ordered_by_corpus_index_whatever_the_chunking():
    rng = np.random.default_rng(1)
    corpus = rng.integers(0, 2, size=(300, 3)).astype(np.float32)  # only 8 distinct rows: many exact ties
    queries = rng.integers(0, 3, size=(9, 3)).astype(np.float32)
    _, expected = brute_top_k(queries, corpus, 25, cosine=False)
    for q_chunk, c_chunk in ((4, 7), (9, 300), (1, 13)):
        found = semantic_search(queries, corpus, 25, score="dot", query_chunk_size=q_chunk, corpus_chunk_size=c_chunk)
        np.testing.assert_array_equal(found.indices, expected)


def test_torch_input_single_query_and_k_larger_than_corpus():
    corpus = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    found = semantic_search(torch.tensor([1.0, 0.1]), corpus, top_k=10)
    assert found.indices.tolist() == [[0, 2, 1]]
    assert found.scores[0, 0] == pytest.approx(1 / np.sqrt(1.01), abs=1e-6)


def test_semantic_search_rejects_bad_arguments():
    with pytest.raises(ValueError, match="width"):
        semantic_search(np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="top_k"):
        semantic_search(np.ones((2, 3)), np.ones((4, 3)), top_k=0)
    with pytest.raises(ValueError, match="unknown similarity"):
        semantic_search(np.ones((2, 3)), np.ones((4, 3)), score="jaccard")


def _brute_pairs(emb: np.ndarray) -> list[tuple[float, int, int]]:
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    scores = unit @ unit.T
    pairs = [(float(scores[i, j]), i, j) for i, j in itertools.combinations(range(len(emb)), 2)]
    return sorted(pairs, key=lambda p: (-p[0], p[1], p[2]))


def test_mining_equals_brute_force_on_500_texts():
    emb = np.random.default_rng(2).normal(size=(500, 16)).astype(np.float32)
    expected = _brute_pairs(emb)
    mined = paraphrase_mining(emb, top_k=499, max_pairs=10**6, query_chunk_size=33, corpus_chunk_size=101)
    assert len(mined) == len(expected) == 500 * 499 // 2
    exact = {(i, j): s for s, i, j in expected}
    # Same pairs, same scores, and the same order up to float32 rounding (pairs closer than 1e-5 may swap).
    np.testing.assert_allclose([p.score for p in mined], [exact[p.i, p.j] for p in mined], atol=1e-5)
    np.testing.assert_allclose([p.score for p in mined], [s for s, _, _ in expected], atol=1e-5)
    assert [(p.i, p.j) for p in mined[:100]] == [(i, j) for _, i, j in expected[:100]]
    assert paraphrase_mining(emb, top_k=499, max_pairs=10**6, query_chunk_size=500) == mined  # deterministic


def test_mining_with_small_top_k_keeps_each_rows_best_partners():
    emb = np.random.default_rng(3).normal(size=(500, 16)).astype(np.float32)
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    scores = unit @ unit.T
    np.fill_diagonal(scores, -np.inf)
    best = np.argsort(-scores, axis=1, kind="stable")[:, :3]
    wanted = {(min(i, j), max(i, j)) for i in range(500) for j in best[i]}
    mined = paraphrase_mining(emb, top_k=3, max_pairs=10**6, query_chunk_size=64)
    assert {(p.i, p.j) for p in mined} == wanted
    top = paraphrase_mining(emb, top_k=3, max_pairs=10, query_chunk_size=7)
    assert top == mined[:10]  # max_pairs keeps the best, however the work is chunked
    assert [p.score for p in mined] == sorted((p.score for p in mined), reverse=True)


def test_mining_threshold_and_exact_duplicates():
    emb = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    mined = paraphrase_mining(emb, top_k=3, threshold=0.5)
    # cos: (0,1) = 1, (2,3) = 0.8, (0,3) = (1,3) = 0.6, (0,2) = (1,2) = 0 (below the threshold)
    assert [(p.i, p.j) for p in mined] == [(0, 1), (2, 3), (0, 3), (1, 3)]
    np.testing.assert_allclose([p.score for p in mined], [1.0, 0.8, 0.6, 0.6], atol=1e-6)


def test_mining_texts_need_an_encoder(model):
    with pytest.raises(ValueError, match="no encoder"):
        paraphrase_mining(["a", "b"])
    texts = ["A man plays the guitar.", "The weather is cold.", "Someone is playing a guitar."]
    mined = paraphrase_mining(texts, model, top_k=2)
    assert (mined[0].i, mined[0].j) == (0, 2)
