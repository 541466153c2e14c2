"""Encoder behaviour on the default model: shapes, order, equivalence with the reference, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sbert


def test_shapes_for_one_text_a_list_and_nothing(model):
    assert model.dim == 384 and model.max_seq_length == 256
    one = model.encode("A man is playing a guitar.")
    assert one.shape == (384,) and one.dtype == np.float32
    many = model.encode(["a", "b c"])
    assert many.shape == (2, 384)
    np.testing.assert_allclose(many[0], model.encode("a"), atol=1e-6)
    empty = model.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert model.encode([], output="token") == []


def test_torch_output_and_normalize(model):
    out = model.encode(["one text", "another one"], convert_to="torch", normalize=True)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 384)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(2))


def test_batch_equals_one_at_a_time_on_shuffled_lengths(model, stsb_sentences):
    texts = stsb_sentences[:60]
    lengths = [len(t) for t in texts]
    assert lengths != sorted(lengths) and lengths != sorted(lengths, reverse=True)
    together = model.encode(texts, batch_size=16)
    alone = np.stack([model.encode(t) for t in texts])
    assert np.abs(together - alone).max() <= 1e-5


def test_without_smart_batching_gives_the_same_vectors(model, stsb_sentences):
    texts = stsb_sentences[:64]
    sorted_ = model.encode(texts, batch_size=8)
    unsorted = model.encode(texts, batch_size=8, sort_by_length=False)
    assert np.abs(sorted_ - unsorted).max() <= 1e-5


def test_equivalent_to_sentence_transformers(model, reference, stsb_sentences):
    assert len(stsb_sentences) >= 300
    ours = model.encode(stsb_sentences, batch_size=32)
    theirs = reference.encode(stsb_sentences, batch_size=32, convert_to_numpy=True)
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() <= 1e-5


def test_token_output_drops_padding_and_matches_mean_pooling(model):
    texts = ["short", "a much longer sentence with many more tokens in it"]
    tokens = model.encode(texts, output="token")
    ids, _ = model.transformer.tokenize(texts)
    assert [t.shape for t in tokens] == [(len(i), 384) for i in ids]
    pooled = np.stack([t.mean(axis=0) for t in tokens])
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)  # the default model ends in Normalize
    np.testing.assert_allclose(pooled, model.encode(texts), atol=1e-5)


@pytest.mark.parametrize("packing", [False, True])
def test_encode_tokenized_equals_encode(model, stsb_sentences, packing):
    texts = [*stsb_sentences[:40], "word " * 400]
    tokens = model.tokenize(texts)
    assert tokens.lengths == [len(ids) for ids in tokens.ids] and tokens.lengths[-1] == model.max_seq_length
    assert tokens.truncated == [40] and len(tokens) == 41
    options = {"batch_size": 8, "normalize": True, "packing": packing, "truncate_dim": 100}
    expected = model.encode(texts, on_truncation="ignore", **options)
    got = model.encode_tokenized(tokens, **options)
    assert got.shape == (41, 100) and np.abs(got - expected).max() <= 1e-6


def test_tokenize_refuses_what_encode_refuses(model):
    with pytest.raises(TypeError, match=r"texts\[1\] is int, expected str"):
        model.tokenize(["fine", 3])
    with pytest.raises(ValueError, match=r"texts\[0\] is not valid Unicode text"):
        model.tokenize(["\ud800 lone surrogate"])


def test_truncation_is_reported(model):
    long_text = "word " * 400
    with pytest.warns(UserWarning, match="1 of 2 texts were longer than max_seq_length=256") as caught:
        model.encode([long_text, "short"])
    assert caught[0].filename == __file__  # the caller's line, not torch's inference_mode wrapper
    with pytest.raises(ValueError, match=r"texts\[1\] is longer than max_seq_length"):
        model.encode(["short", long_text], on_truncation="error")


def test_max_seq_length_truncates(model):
    model.max_seq_length = 8
    try:
        ids, truncated = model.transformer.tokenize(["one two three four five six seven eight nine"])
        assert len(ids[0]) == 8 and truncated == [0]
    finally:
        model.max_seq_length = 256
    with pytest.raises(ValueError, match="exceeds what this model supports"):
        model.max_seq_length = 4096


@pytest.mark.parametrize(
    ("texts", "error", "message"),
    [
        (None, TypeError, "texts must be a string or a sequence of strings, got NoneType"),
        (["fine", None], TypeError, r"texts\[1\] is NoneType, expected str"),
        (["fine", 3], TypeError, r"texts\[1\] is int, expected str"),
        (b"bytes", TypeError, "got bytes"),
        (["fine", ""], ValueError, r"texts\[1\] is empty"),
        ("   ", ValueError, r"texts\[0\] is empty or only whitespace"),
    ],
)
def test_bad_texts_get_specific_errors(model, texts, error, message):
    with pytest.raises(error, match=message):
        model.encode(texts)


def test_empty_text_allowed_on_request(model):
    assert model.encode(["", "x"], allow_empty=True).shape == (2, 384)


def test_bad_options(model):
    with pytest.raises(ValueError, match="convert_to"):
        model.encode(["x"], convert_to="list")
    with pytest.raises(ValueError, match="batch_size"):
        model.encode(["x"], batch_size=0)


def test_progress_bar_when_asked(model, capsys):
    model.encode(["a", "b"], show_progress=True)
    assert "encode" in capsys.readouterr().err
    model.encode(["a", "b"])
    assert capsys.readouterr().err == ""


def test_encode_runs_in_evaluation_mode_and_restores_training(model):
    expected = model.encode(["a short text", "another one"])
    model.train()
    try:
        assert np.array_equal(model.encode(["a short text", "another one"]), expected)  # dropout off
        assert all(module.training for module in model.modules())
        model.eval()
        model[0].train()  # the transformer alone training (dropout 0.1): encode must still switch it off
        assert not model.training
        assert np.array_equal(model.encode(["a short text", "another one"]), expected)
        assert model[0].training and not model.training  # each module's mode as it was
        model.eval()
        deepest = [module for module in model.modules() if isinstance(module, torch.nn.Dropout)][-1]
        deepest.train()  # one dropout, deep inside, alone training
        assert np.array_equal(model.encode(["a short text", "another one"]), expected)
        assert [m for m in model.modules() if m.training] == [deepest]
    finally:
        model.eval()


@pytest.mark.slow
def test_load_never_imports_sentence_transformers():
    import subprocess
    import sys

    code = "import sys, sbert; sbert.load().encode('x'); print('sentence_transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, sbert; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
    assert sbert.__version__


AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma f16c\n"
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.mark.parametrize(
    ("cpuinfo", "native"), [(AVX2_ONLY, False), (SAPPHIRE_RAPIDS, True), (GRAVITON3, True), ("", None)]
)
def test_bf16_support_is_read_from_the_cpu_flags(tmp_path, cpuinfo, native):
    from sbert.encoder import cpu_has_native_bf16

    (tmp_path / "cpuinfo").write_text(cpuinfo)
    assert cpu_has_native_bf16(tmp_path / "cpuinfo") is native
    assert cpu_has_native_bf16(tmp_path / "missing") is None


def test_bf16_on_a_cpu_without_native_bf16_warns_at_the_callers_line(model, monkeypatch):
    import warnings

    import sbert.encoder

    monkeypatch.setattr(sbert.encoder, "cpu_has_native_bf16", lambda: False)
    try:
        with pytest.warns(UserWarning, match=r"without native bfloat16 .* several times slower than fp32") as caught:
            model.use_backend("torch", "bf16")
        assert caught[0].filename == __file__
        assert model.precision == "bf16"
        with pytest.warns(UserWarning, match="without native bfloat16") as caught:
            sbert.load(model.path, device="cpu", precision="bf16")
        assert caught[0].filename == __file__
        monkeypatch.setattr(sbert.encoder, "cpu_has_native_bf16", lambda: True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.use_backend("torch", "bf16")
    finally:
        model.use_backend("torch")
