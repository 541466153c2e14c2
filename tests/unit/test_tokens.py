"""encode_ids: the ids, truncation and overflow of encode_batch, without offsets where tokenizers allows;
collection_paused: the garbage collector held off while texts become ids, and put back as it was."""

from __future__ import annotations

import gc
import threading

import pytest
from tokenizers import Tokenizer

from sbert.token_ids import collection_paused, encode_ids

TEXTS = ["A man is playing a guitar.", "NullPointerException at org.openoffice.Foo.bar(Foo.java:12)", "word " * 10, ""]


def default_tokenizer(model, limit: int | None) -> Tokenizer:
    """A private copy of the default model's Rust tokenizer (``model``: the session's loaded default model)."""
    tokenizer = Tokenizer.from_str(model.transformer.tokenizer.backend_tokenizer.to_str())
    tokenizer.no_padding()
    if limit is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(limit)
    return tokenizer


def test_same_ids_and_overflow_as_encode_batch(model):
    for limit in (None, 6):
        tokenizer = default_tokenizer(model, limit)
        for special in (True, False):
            want = tokenizer.encode_batch(TEXTS, add_special_tokens=special)
            got = encode_ids(tokenizer, TEXTS, add_special_tokens=special)
            assert [e.ids for e in got] == [e.ids for e in want]
            assert [bool(e.overflowing) for e in got] == [bool(e.overflowing) for e in want]
    assert [bool(e.overflowing) for e in encode_ids(default_tokenizer(model, 6), TEXTS, add_special_tokens=True)] == [
        True,
        True,
        True,
        False,
    ]


def test_falls_back_to_encode_batch_without_the_fast_method(model):
    class Older:  # a tokenizers release before encode_batch_fast (0.20)
        def __init__(self, inner: Tokenizer) -> None:
            self.inner = inner

        def encode_batch(self, texts, add_special_tokens):
            return self.inner.encode_batch(texts, add_special_tokens=add_special_tokens)

    tokenizer = default_tokenizer(model, None)
    got = encode_ids(Older(tokenizer), TEXTS[:2], add_special_tokens=False)
    assert [e.ids for e in got] == [e.ids for e in tokenizer.encode_batch(TEXTS[:2], add_special_tokens=False)]
    assert got[0].offsets  # encode_batch's encodings carry offsets


@pytest.fixture
def collector_on():
    """The collector on before the test, and on again after it whatever the test did."""
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_collection_paused_nests_and_restores(collector_on):
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block closing does not turn it back on
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("inside")
    assert gc.isenabled()  # put back after an exception too


def test_collection_paused_leaves_a_callers_off_switch_alone(collector_on):
    gc.disable()
    with collection_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_collection_paused_overlapping_threads_end_with_it_on(collector_on):
    entered, leave = threading.Barrier(2), threading.Event()
    seen = []

    def hold(wait: bool) -> None:
        with collection_paused():
            entered.wait(timeout=10)
            if wait:
                leave.wait(timeout=10)
            seen.append(gc.isenabled())

    first, second = threading.Thread(target=hold, args=(False,)), threading.Thread(target=hold, args=(True,))
    first.start(), second.start()
    first.join(timeout=10)
    assert not gc.isenabled()  # the first thread left, the second is still inside
    leave.set()
    second.join(timeout=10)
    assert seen == [False, False] and gc.isenabled()


def test_encoder_tokenizes_with_the_collector_paused(model, monkeypatch, collector_on):
    states, tokenize = [], model.transformer.tokenize

    def spy(texts):
        states.append(gc.isenabled())
        return tokenize(texts)

    monkeypatch.setattr(model.transformer, "tokenize", spy)
    model.encode(["one sentence", "and another"])
    assert states == [False] and gc.isenabled()
