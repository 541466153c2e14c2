"""Exact top-k search and paraphrase mining against brute force, on any processor.

Different chunk sizes give float32 matrix products whose last bits differ (and differently on each
processor), so results of different code paths are compared with a tolerance (``ranking``). The
``noisy_products`` fixture makes that noise happen on every processor, as it does on some by itself.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from ranking import assert_same_pairs, assert_top_k

from sbert import similarity
from sbert.search import paraphrase_mining, semantic_search


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a / np.linalg.norm(a, axis=1, keepdims=True)) @ (b / np.linalg.norm(b, axis=1, keepdims=True)).T


def brute_top_k(q: np.ndarray, c: np.ndarray, k: int, cosine: bool = True):
    scores = cosine_matrix(q, c) if cosine else q.astype(np.float64) @ c.T.astype(np.float64)
    order = np.lexsort((np.broadcast_to(np.arange(len(c)), scores.shape), -scores), axis=-1)[:, :k]
    return np.take_along_axis(scores, order, 1), order


@pytest.fixture(params=[False, True], ids=["plain", "noisy"])
def noisy_products(request, monkeypatch):
    """With "noisy", every float32 score block has the last bit of some entries flipped up, at places that
    depend on the block's shape: the same pair then scores differently under different chunk sizes."""
    if request.param:
        real = similarity.get

        def noisy_get(name: str, pairwise: bool = False):
            fn = real(name, pairwise)
            if pairwise:
                return fn

            def noisy(a, b):
                s = fn(a, b)
                rows, cols = torch.arange(s.shape[0])[:, None], torch.arange(s.shape[1])[None, :]
                flip = (rows * 3 + cols * 5 + s.shape[0] + s.shape[1]) % 3 == 0
                return torch.where(flip, torch.nextafter(s, torch.full_like(s, np.inf)), s)

            return noisy

        monkeypatch.setattr(similarity, "get", noisy_get)
    return request.param


# chunks of one query and one corpus row: 5 queries (5,015 chunk pairs), not 37 (37,111 pairs took 17-25 s)
@pytest.mark.slow
@pytest.mark.parametrize(
    "query_chunk, corpus_chunk, n_queries", [(1, 1, 5), (7, 97, 37), (1000, 1000, 37), (3, 1003, 37)]
)
def test_semantic_search_equals_brute_force_with_odd_chunks(query_chunk, corpus_chunk, n_queries, noisy_products):
    rng = np.random.default_rng(0)
    corpus, queries = rng.normal(size=(1003, 24)).astype(np.float32), rng.normal(size=(37, 24)).astype(np.float32)
    queries = queries[:n_queries]
    truth = cosine_matrix(queries, corpus)
    for exact_scores in (True, False):
        found = semantic_search(
            queries, corpus, 11, query_chunk_size=query_chunk, corpus_chunk_size=corpus_chunk, exact_scores=exact_scores
        )
        assert found.indices.shape == (n_queries, 11) and found.scores.dtype == np.float32
        assert_top_k(found.scores, found.indices, truth, atol=1e-6)


def test_ties_are_ordered_by_corpus_index_whatever_the_chunking():
    rng = np.random.default_rng(1)
    corpus = rng.integers(0, 2, size=(300, 3)).astype(np.float32)  # only 8 distinct rows: many exact ties
    queries = rng.integers(0, 3, size=(9, 3)).astype(np.float32)
    _, expected = brute_top_k(queries, corpus, 25, cosine=False)
    for q_chunk, c_chunk in ((4, 7), (9, 300), (1, 13)):
        for exact_scores in (True, False):  # small integers: every product is exact, so ties are exact
            found = semantic_search(
                queries,
                corpus,
                25,
                score="dot",
                query_chunk_size=q_chunk,
                corpus_chunk_size=c_chunk,
                exact_scores=exact_scores,
            )
            np.testing.assert_array_equal(found.indices, expected)


@pytest.mark.slow
@pytest.mark.parametrize("score", ["cosine", "dot", "euclidean", "manhattan"])
def test_scores_and_order_do_not_depend_on_chunk_sizes(score, noisy_products):
    """Equal vectors (duplicate texts) get equal scores and come in index order, however the work is chunked."""
    rng = np.random.default_rng(2)
    distinct = rng.normal(size=(20, 48)).astype(np.float32)
    which = rng.integers(0, 20, 600)
    corpus, queries = distinct[which], rng.normal(size=(30, 48)).astype(np.float32)
    runs = [
        semantic_search(queries, corpus, 40, score=score, query_chunk_size=q, corpus_chunk_size=c)
        for q, c in ((100, 500_000), (7, 97), (1, 13), (30, 599))
    ]
    for run in runs[1:]:  # the same rows, and each pair's score computed one way only: identical results
        np.testing.assert_array_equal(run.indices, runs[0].indices)
        np.testing.assert_array_equal(run.scores, runs[0].scores)
    found = runs[0]
    for scores, rows in zip(found.scores, found.indices, strict=True):
        for a, b in itertools.combinations(range(len(rows)), 2):
            if which[rows[a]] == which[rows[b]]:  # the same vector twice
                assert scores[a] == scores[b] and rows[a] < rows[b]


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


@pytest.mark.slow
def test_mining_equals_brute_force_on_500_texts(noisy_products):
    emb = np.random.default_rng(2).normal(size=(500, 16)).astype(np.float32)
    expected = _brute_pairs(emb)
    mined = paraphrase_mining(emb, top_k=499, max_pairs=10**6, query_chunk_size=33, corpus_chunk_size=101)
    assert len(mined) == len(expected) == 500 * 499 // 2
    assert {(p.i, p.j) for p in mined} == {(i, j) for _, i, j in expected}
    exact = {(i, j): s for s, i, j in expected}
    # Each pair's score, and best first up to float32 rounding (pairs closer than that may swap).
    np.testing.assert_allclose([p.score for p in mined], [exact[p.i, p.j] for p in mined], atol=1e-6)
    np.testing.assert_allclose([exact[p.i, p.j] for p in mined], [s for s, _, _ in expected], atol=1e-6)
    assert [p.score for p in mined] == sorted((p.score for p in mined), reverse=True)  # by its own scores
    other = paraphrase_mining(emb, top_k=499, max_pairs=10**6, query_chunk_size=500)
    assert_same_pairs(other, mined, atol=1e-6)  # other chunk sizes: the same up to rounding


def test_mining_with_small_top_k_keeps_each_rows_best_partners(noisy_products):
    emb = np.random.default_rng(3).normal(size=(500, 16)).astype(np.float32)
    scores = cosine_matrix(emb, emb)
    np.fill_diagonal(scores, -np.inf)
    ranked = -np.sort(-scores, axis=1)
    third, fourth = ranked[:, 2], ranked[:, 3]  # each row's 3rd and 4th best partner scores
    mined = paraphrase_mining(emb, top_k=3, max_pairs=10**6, query_chunk_size=64)
    found = {(p.i, p.j) for p in mined}
    atol = 1e-6
    for i, j in itertools.combinations(range(500), 2):
        s = scores[i, j]
        clearly_in = s > fourth[i] + atol or s > fourth[j] + atol  # among the 3 best of i or of j
        clearly_out = s < third[i] - atol and s < third[j] - atol
        assert not (clearly_in and (i, j) not in found), (i, j)
        assert not (clearly_out and (i, j) in found), (i, j)
    top = paraphrase_mining(emb, top_k=3, max_pairs=10, query_chunk_size=7)
    assert_same_pairs(top, mined[:10], atol=atol)  # max_pairs keeps the best, however the work is chunked
    assert [p.score for p in mined] == sorted((p.score for p in mined), reverse=True)


@pytest.mark.slow
@pytest.mark.parametrize("noisy_products", [True], indirect=True, ids=["noisy"])
def test_mining_with_exact_scores_does_not_depend_on_chunk_sizes(noisy_products):
    rng = np.random.default_rng(4)
    emb = rng.normal(size=(40, 16)).astype(np.float32)[rng.integers(0, 40, 300)]  # many duplicate rows
    runs = [
        paraphrase_mining(emb, top_k=20, max_pairs=5000, query_chunk_size=q, corpus_chunk_size=c, exact_scores=True)
        for q, c in ((1000, 100_000), (30, 77), (300, 299))
    ]
    assert runs[1] == runs[0] and runs[2] == runs[0]
    assert runs[0][0].score == 1.0  # duplicates: cosine exactly 1, first by (i, j)


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


def test_ranking_orders_by_score_then_id_and_puts_missing_last():
    from sbert.search import ranking

    scores = np.array([[0.5, 0.9, 0.5, 0.7, 0.9, 0.1]], np.float32)
    ids = np.array([[7, 3, 2, -1, 8, 5]])
    best_scores, best_ids = ranking.top(scores, ids, 4)
    assert best_ids.tolist() == [[3, 8, 2, 7]]  # 0.9 (3, 8), then 0.5 (2, 7); the missing entry (-1) is not ranked
    np.testing.assert_allclose(best_scores, [[0.9, 0.9, 0.5, 0.5]])
    everything = ranking.top(scores, ids)
    assert everything[1][0, -1] == -1 and everything[0][0, -1] == -np.inf
    # One dimension, several id keys (mining's pairs: i, then j); no ids: equal scores keep their positions.
    s, i, j = np.array([0.3, 0.8, 0.3, 0.3]), np.array([1, 0, 1, 0]), np.array([4, 2, 3, 9])
    assert ranking.order(s, i, j).tolist() == [1, 3, 2, 0]
    assert ranking.order(np.array([0.2, 0.5, 0.2, 0.5])).tolist() == [1, 3, 0, 2]


def test_ranking_band_keeps_every_candidate_within_float_rounding_of_the_cut():
    from sbert.search import ranking

    cut = np.float32(0.75)
    close = np.nextafter(cut, np.float32(0), dtype=np.float32)  # one float32 step below the k-th score
    scores = np.array([[0.5, cut, 0.74, close, 0.9]], np.float32)
    kept_scores, kept_ids = ranking.band(scores, np.arange(5)[None, :], 2)
    assert kept_ids.tolist() == [[4, 1, 3]]  # the best 2, then the k-th's neighbour in the band; 0.74 is out
    assert kept_scores[0, -1] == close and 0.74 < ranking.floor(np.array([[cut]]))[0, 0] < close


def test_rerank_and_cross_encoder_rank_break_ties_by_position():
    from sbert.cross_encoder import CrossEncoder
    from sbert.search.index.folder import Hit
    from sbert.search.rerank import rerank

    class Scorer:
        num_labels = 1

        def predict(self, pairs, batch_size=32, show_progress=None):
            return np.array([{"a": 0.2, "b": 0.9, "c": 0.2, "d": 0.9}[doc] for _, doc in pairs], np.float32)

    hits = [Hit(f"id{n}", 0.0, text, n) for n, text in enumerate("abcd")]
    assert [h.id for h in rerank(Scorer(), "q", hits)] == ["id1", "id3", "id0", "id2"]
    assert [h.score for h in rerank(Scorer(), "q", hits, top_k=3)] == pytest.approx([0.9, 0.9, 0.2])
    scorer = Scorer()
    assert CrossEncoder.rank(scorer, "q", list("abcd"), top_k=3) == [
        (1, pytest.approx(0.9)),
        (3, pytest.approx(0.9)),
        (0, pytest.approx(0.2)),
    ]
