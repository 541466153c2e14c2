"""``Encoder.reusing_vectors``: a text or window embedded once within the context is looked up, not run
again, and gives the vector that running it gives; anything that changes a vector is run anew."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY_WORDS, count_forward_rows, make_tiny_encoder

from sbert.windows import encode_documents

TEXTS = [" ".join(TINY_WORDS[i : i + 5]) for i in range(8)]


def test_texts_embedded_once_are_looked_up_and_equal_what_running_them_gives():
    encoder = make_tiny_encoder()
    plain = encoder.encode(TEXTS)
    rows = count_forward_rows(encoder)
    with encoder.reusing_vectors() as memo:
        first = encoder.encode(TEXTS)
        again = encoder.encode([TEXTS[3], "zebra cat", TEXTS[0]])
    assert rows == [8, 1]  # only "zebra cat" ran the second time
    assert (memo.computed, memo.reused, len(memo)) == (9, 2, 9)
    np.testing.assert_allclose(first, plain, atol=1e-6)
    np.testing.assert_allclose(again[[0, 2]], plain[[3, 0]], atol=1e-6)
    np.testing.assert_allclose(again[1], encoder.encode("zebra cat"), atol=1e-6)
    assert encoder._memo is None  # gone after the context: nothing is kept between uses
    encoder.encode(TEXTS)
    assert rows[-1] == 8


def test_what_changes_a_vector_is_never_looked_up():
    encoder = make_tiny_encoder()
    expected = {
        "plain": encoder.encode(TEXTS),
        "normalized": encoder.encode(TEXTS, normalize=True),
        "cut": encoder.encode(TEXTS, truncate_dim=8),
        "prompted": encoder.encode(TEXTS, prompt="query: "),
    }
    rows = count_forward_rows(encoder)
    with encoder.reusing_vectors() as memo:
        got = {
            "plain": encoder.encode(TEXTS),
            "normalized": encoder.encode(TEXTS, normalize=True),
            "cut": encoder.encode(TEXTS, truncate_dim=8),
            "prompted": encoder.encode(TEXTS, prompt="query: "),
        }
        tokens = encoder.encode(TEXTS[:2], output="token")  # token vectors: never kept
    assert memo.reused == 0 and memo.computed == 32 and sum(rows) == 32  # token vectors: neither counted
    for name, vectors in expected.items():
        np.testing.assert_allclose(got[name], vectors, atol=1e-6, err_msg=name)
    assert got["cut"].shape == (8, 8) and len(tokens) == 2


def test_a_document_in_one_window_reuses_its_whole_embedding_and_contexts_nest():
    encoder = make_tiny_encoder()
    rows = count_forward_rows(encoder)
    with encoder.reusing_vectors() as outer:
        whole = encoder.encode_document(TEXTS)
        with encoder.reusing_vectors() as inner:
            windows = encode_documents(encoder, TEXTS)
        assert inner is outer  # the inner context shares the outer memo
    assert sum(rows) == len(TEXTS) and outer.reused == len(TEXTS)
    assert windows.doc.tolist() == list(range(len(TEXTS)))  # one window a document
    np.testing.assert_allclose(windows.vectors, whole, atol=1e-6)


def test_a_memo_is_cleared_when_the_context_fails():
    encoder = make_tiny_encoder()
    with pytest.raises(RuntimeError), encoder.reusing_vectors():
        encoder.encode(TEXTS[:1])
        raise RuntimeError("stop")
    assert encoder._memo is None
