"""Packed (unpadded) batches: row assignment by hand, the packed layout, and equality with padding."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sbert.batching import batches, pack_rows


def test_pack_rows_first_fit_longest_first_by_hand():
    # lengths 5, 3, 4, 2, 6 into rows of 8: 6 -> row0; 5 -> row1; 4 -> row2; 3 -> row1 (5+3); 2 -> row0 (6+2)
    assert pack_rows([5, 3, 4, 2, 6], 8) == [[4, 3], [0, 1], [2]]


def test_pack_rows_covers_each_index_once_within_width():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=300).tolist()
    rows = pack_rows(lengths, 64)
    assert sorted(i for row in rows for i in row) == list(range(300))
    assert all(sum(lengths[i] for i in row) <= 64 for row in rows)


def test_pack_rows_refuses_text_longer_than_row():
    with pytest.raises(ValueError, match="70 tokens does not fit in packed rows of 64"):
        pack_rows([3, 70], 64)


def test_packed_batches_cap_real_tokens_by_hand():
    # sorted longest first: 9, 7, 5, 3, 1; at most 12 real tokens per batch -> [9], [7, 5], [3, 1]
    got = [b.tolist() for b in batches([5, 9, 1, 7, 3], batch_size=10, max_tokens=12, packed=True)]
    assert got == [[1], [3, 0], [4, 2]]
    # padded counting of the same lengths: [9], [7] (2 x 7 = 14 > 12), [5, 3] (10), [1]
    got = [b.tolist() for b in batches([5, 9, 1, 7, 3], batch_size=10, max_tokens=12)]
    assert got == [[1], [3], [0, 4], [2]]


def test_collate_packed_layout_by_hand(model):
    batch = [[101, 7, 8, 102], [101, 9, 102], [101, 5, 6, 4, 3, 102]]
    f = model.transformer.collate_packed(batch, width=8)
    # rows: the 6-token text alone (3 + 4 don't fit with it), then the 4- and 3-token texts (7 of 8)
    assert f["input_ids"].tolist() == [[101, 5, 6, 4, 3, 102, 0, 0], [101, 7, 8, 102, 101, 9, 102, 0]]
    assert f["position_ids"].tolist() == [[0, 1, 2, 3, 4, 5, 0, 0], [0, 1, 2, 3, 0, 1, 2, 0]]
    attend = f["packed_attention"][1, 0]
    assert attend[0, :4].all() and not attend[0, 4:].any()  # text 1 sees only itself
    assert attend[5, 4:7].all() and not attend[5, :4].any() and not attend[5, 7]  # text 2 likewise
    assert attend[7].tolist() == [False] * 7 + [True]  # a padding slot sees only itself
    assert f["attention_mask"].tolist() == [[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0], [1] * 6]
    flat = [*f["input_ids"].reshape(-1).tolist(), 0]
    unpacked = [[flat[k] for k in row] for row in f["unpack_index"].tolist()]
    assert unpacked == [[101, 7, 8, 102, 0, 0], [101, 9, 102, 0, 0, 0], [101, 5, 6, 4, 3, 102]]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packed_encode_equals_padded(model, stsb_sentences, attention):
    texts = [*stsb_sentences[:120], "short", "a much longer sentence " * 30]
    config = model.transformer.model.config
    was = config._attn_implementation
    config._attn_implementation = attention
    try:
        padded = model.encode(texts, batch_size=16, on_truncation="ignore")
        packed = model.encode(texts, batch_size=256, packing=True, on_truncation="ignore")
        unsorted = model.encode(
            texts, batch_size=256, packing=True, sort_by_length=False, max_tokens=600, on_truncation="ignore"
        )
    finally:
        config._attn_implementation = was
    assert np.abs(padded - packed).max() < 1e-5
    assert np.abs(padded - unsorted).max() < 1e-5


def test_packed_token_output_equals_padded(model, stsb_sentences):
    texts = stsb_sentences[:20]
    padded = model.encode(texts, output="token")
    packed = model.encode(texts, output="token", packing=True, batch_size=64)
    assert [t.shape for t in packed] == [t.shape for t in padded]
    assert max(np.abs(a - b).max() for a, b in zip(padded, packed, strict=True)) < 1e-5


def test_packed_bf16_close_to_fp32(model, stsb_sentences):
    texts = stsb_sentences[:32]
    reference = model.encode(texts, normalize=True)
    with warnings.catch_warnings():  # bf16 emulated on this CPU (or not): beside the point here
        warnings.filterwarnings("ignore", "precision='bf16' on a CPU without native bfloat16")
        model.use_backend("torch", "bf16")
    try:
        packed = model.encode(texts, normalize=True, packing=True, batch_size=64)
    finally:
        model.use_backend("torch")
    assert (reference * packed).sum(axis=1).min() > 0.99


def test_packing_refused_where_it_would_be_wrong(model, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(model.transformer.model.config, "model_type", "mpnet")
        with pytest.raises(ValueError, match="packing supports BERT-family models; this one is 'mpnet'"):
            model.encode(["a text"], packing=True)
    assert model.can_pack
    with monkeypatch.context() as patch:
        patch.setattr(type(model), "backend_name", property(lambda self: "onnx"))
        assert not model.can_pack
        with pytest.raises(ValueError, match="packing runs on the torch backend only"):
            model.encode(["a text"], packing=True)
