"""encode_ids: the ids, truncation and overflow of encode_batch, without offsets where tokenizers allows."""

from __future__ import annotations

from tokenizers import Tokenizer

from sbert.tokens import encode_ids

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
