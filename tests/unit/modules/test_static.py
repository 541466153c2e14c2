"""Static models (``sbert.modules.static``): the table maths, and folders of sentence-transformers and
model2vec read and written with equal embeddings both ways."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import torch

import sbert
from sbert.encoder import Encoder
from sbert.errors import ModelFormatError
from sbert.model_names import resolve
from sbert.modules import Dense, Normalize, StaticEmbedding
from sbert.modules.static import save_model2vec

TEXTS = [
    "A man is playing a guitar.",
    "getUserById returns null when the cache is cold",
    "a parrot 🦜 said hello",  # the emoji is an unknown token for the default tokenizer
    "cat",
]


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(resolve("default") / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@pytest.fixture(scope="module")
def table(tokenizer) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(tokenizer.get_vocab_size(), 12)).astype(np.float32)


def test_a_sentence_vector_is_the_mean_of_its_tokens_rows(tokenizer, table):
    encoder = Encoder([StaticEmbedding(tokenizer, table)])
    ids = tokenizer.encode("the cat sat", add_special_tokens=False).ids
    assert len(ids) == 3
    expected = (table[ids[0]] + table[ids[1]] + table[ids[2]]) / 3
    np.testing.assert_allclose(encoder.encode("the cat sat"), expected, rtol=1e-6, atol=1e-6)


def test_per_token_weights_multiply_each_row_before_the_mean(tokenizer, table):
    weights = np.linspace(0.1, 2.0, len(table)).astype(np.float32)
    encoder = Encoder([StaticEmbedding(tokenizer, table, weights)])
    ids = tokenizer.encode("dog bites man", add_special_tokens=False).ids
    expected = sum(table[i] * weights[i] for i in ids) / len(ids)
    np.testing.assert_allclose(encoder.encode("dog bites man"), expected, rtol=1e-6, atol=1e-6)


def test_token_embeddings_are_each_token_s_weighted_row_made_when_asked(tokenizer, table):
    weights = np.linspace(0.1, 2.0, len(table)).astype(np.float32)
    encoder = Encoder([StaticEmbedding(tokenizer, table, weights)])
    texts = ["dog bites man", "cat"]  # padded to three tokens in one batch
    tokens = encoder.encode(texts, output="token")
    for text, rows in zip(texts, tokens, strict=True):
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        np.testing.assert_allclose(rows, table[ids] * weights[ids][:, None], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(encoder.encode(texts), [t.mean(axis=0) for t in tokens], rtol=1e-5, atol=1e-6)


def test_unknown_tokens_count_unless_skipped_and_empty_texts_give_zeros(tokenizer, table):
    keeps = Encoder([StaticEmbedding(tokenizer, table)])
    skips = Encoder([StaticEmbedding(tokenizer, table, skip_unknown=True)])
    unk = tokenizer.token_to_id("[UNK]")
    ids = tokenizer.encode("parrot 🦜", add_special_tokens=False).ids
    assert unk in ids
    known = [i for i in ids if i != unk]
    np.testing.assert_allclose(skips.encode("parrot 🦜"), table[known].mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(keeps.encode("parrot 🦜"), table[ids].mean(0), rtol=1e-6, atol=1e-6)
    assert not skips.encode("🦜", allow_empty=True).any()


def test_max_seq_length_cuts_texts_and_reports_them(tokenizer, table):
    static = StaticEmbedding(tokenizer, table, max_seq_length=2)
    ids, cut = static.tokenize(["one two three", "one"])
    assert [len(i) for i in ids] == [2, 1] and cut == [0]


def test_the_tokenizer_s_own_truncation_is_kept_as_sentence_transformers_keeps_it(tokenizer, table):
    from tokenizers import Tokenizer

    cutting = Tokenizer.from_str(tokenizer.to_str())
    cutting.enable_truncation(5)
    assert StaticEmbedding(cutting, table).max_seq_length == 5
    assert StaticEmbedding(cutting, table, max_seq_length=7).max_seq_length == 7


def test_gradients_reach_the_table_through_embed_with_grad(tokenizer, table):
    encoder = Encoder([StaticEmbedding(tokenizer, table), Normalize()])
    (u,) = encoder.embed_with_grad(["the cat sat", "a dog"])
    u.sum().backward()
    grad = encoder.transformer.embedding.weight.grad
    used = set(tokenizer.encode("the cat sat a dog", add_special_tokens=False).ids)
    assert set(torch.nonzero(grad.abs().sum(1)).flatten().tolist()) == used


@pytest.mark.slow
def test_sentence_transformers_static_folders_round_trip_both_ways(tokenizer, table, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense as StDense
    from sentence_transformers.sentence_transformer.modules import Normalize as StNormalize
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding as StStatic

    st_static = StStatic(tokenizer, embedding_weights=table)
    st_dense = StDense(12, 5, activation_function=torch.nn.Tanh())
    st = SentenceTransformer(modules=[st_static, st_dense, StNormalize()], device="cpu")
    st.save(str(tmp_path / "st"))
    theirs = st.encode(TEXTS)
    ours = sbert.load(tmp_path / "st", device="cpu")
    assert [type(m) for m in ours] == [StaticEmbedding, Dense, Normalize]
    assert np.abs(ours.encode(TEXTS) - theirs).max() <= 1e-6

    ours.save(tmp_path / "back")
    again = SentenceTransformer(str(tmp_path / "back"), device="cpu")
    assert np.abs(again.encode(TEXTS) - theirs).max() <= 1e-6


@pytest.mark.slow
def test_sbert_weighted_static_models_fold_their_weights_for_sentence_transformers(tokenizer, table, tmp_path):
    from sentence_transformers import SentenceTransformer

    weights = np.linspace(0.5, 1.5, len(table)).astype(np.float32)
    ours = Encoder([StaticEmbedding(tokenizer, table, weights), Normalize()])
    ours.save(tmp_path / "m")
    theirs = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    assert np.abs(theirs.encode(TEXTS) - ours.encode(TEXTS)).max() <= 1e-6
    assert np.abs(sbert.load(tmp_path / "m").encode(TEXTS) - ours.encode(TEXTS)).max() <= 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "weighted", "quantized"])
def test_model2vec_folders_load_with_model2vec_s_embeddings(tokenizer, table, tmp_path, variant):
    model2vec = pytest.importorskip("model2vec")
    vectors, weights, mapping = table, None, None
    if variant != "plain":
        weights = np.linspace(0.2, 1.0, len(table)).astype(np.float32)
    if variant == "quantized":  # vocabulary quantisation: 50 shared rows, each token points at one
        vectors = table[:50].copy()
        mapping = (np.arange(len(table)) % 50).astype(np.int64)
    model = model2vec.StaticModel(vectors, tokenizer, normalize=True, weights=weights, token_mapping=mapping)
    model.save_pretrained(tmp_path / "m2v")
    (tmp_path / "m2v" / "modules.json").unlink()  # model2vec folders written before it wrote one
    ours = sbert.load(tmp_path / "m2v", device="cpu")
    assert np.abs(ours.encode(TEXTS) - model.encode(TEXTS)).max() <= 1e-6


@pytest.mark.slow
def test_sbert_writes_model2vec_folders_model2vec_and_sentence_transformers_read(tokenizer, table, tmp_path):
    model2vec = pytest.importorskip("model2vec")
    from sentence_transformers import SentenceTransformer

    weights = np.linspace(0.2, 1.0, len(table)).astype(np.float32)
    static = StaticEmbedding(tokenizer, table, weights, skip_unknown=True)
    save_model2vec(static, tmp_path)
    ours = Encoder([static, Normalize()]).encode(TEXTS)
    theirs = model2vec.StaticModel.from_pretrained(tmp_path).encode(TEXTS)
    assert np.abs(ours - theirs).max() <= 1e-6
    assert np.abs(sbert.load(tmp_path).encode(TEXTS) - ours).max() <= 1e-6
    st = SentenceTransformer(str(tmp_path), device="cpu").encode(TEXTS[:2])  # no unknown tokens there
    assert np.abs(st - ours[:2]).max() <= 1e-6


def _static_folder(tokenizer, table, path):
    Encoder([StaticEmbedding(tokenizer, table)]).save(path)
    return path / "0_StaticEmbedding"


@pytest.mark.slow
def test_bad_static_folders_are_refused_naming_the_file(tokenizer, table, tmp_path):
    from safetensors.numpy import save_file

    module = _static_folder(tokenizer, table, tmp_path / "no-tokenizer")
    (module / "tokenizer.json").unlink()
    with pytest.raises(ModelFormatError, match=r"tokenizer\.json: file not found"):
        sbert.load(tmp_path / "no-tokenizer")

    module = _static_folder(tokenizer, table, tmp_path / "bad-tokenizer")
    (module / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelFormatError, match=r"tokenizer\.json: not a readable tokenizer"):
        sbert.load(tmp_path / "bad-tokenizer")

    module = _static_folder(tokenizer, table, tmp_path / "wrong-key")
    save_file({"table": table}, str(module / "model.safetensors"))
    with pytest.raises(ModelFormatError, match=r"model\.safetensors: holds table; a static model needs"):
        sbert.load(tmp_path / "wrong-key")

    module = _static_folder(tokenizer, table, tmp_path / "short")
    save_file({"embedding.weight": table[:100]}, str(module / "model.safetensors"))
    with pytest.raises(ModelFormatError, match=r"model\.safetensors: the table has 100 rows but tokenizer\.json has"):
        sbert.load(tmp_path / "short")

    shutil.copytree(module, tmp_path / "m2v")
    save_file({"embeddings": table, "weights": np.ones(3, np.float32)}, str(tmp_path / "m2v" / "model.safetensors"))
    (tmp_path / "m2v" / "config.json").write_text(json.dumps({"model_type": "model2vec"}), encoding="utf-8")
    with pytest.raises(ModelFormatError, match=r"model\.safetensors: 'weights' has shape \(3,\)"):
        sbert.load(tmp_path / "m2v")


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("normalized", [False, True])
def test_encode_s_numpy_shortcut_gives_what_the_modules_give_and_stands_aside_where_it_cannot(
    tokenizer, table, weighted, normalized
):
    weights = np.linspace(0.1, 2.0, len(table)).astype(np.float32) if weighted else None
    encoder = Encoder([StaticEmbedding(tokenizer, table, weights), *([Normalize()] if normalized else [])])
    texts = [*TEXTS, ""]  # lengths 1 to 10 padded in one batch, and a text without tokens (zeros either way)
    features = encoder.transformer.collate(encoder.transformer.tokenize(texts)[0])
    with torch.inference_mode():
        shortcut = encoder.table_sentences(features)
        modules = encoder(features)["sentence_embedding"]
    assert shortcut is not None and shortcut.dtype == torch.float32
    np.testing.assert_allclose(shortcut.numpy(), modules.numpy(), rtol=1e-5, atol=1e-6)  # summation orders differ
    assert not shortcut[-1].any()
    with torch.enable_grad():  # training reads the modules' graph: no shortcut
        assert encoder.table_sentences(features) is None


def test_encode_runs_the_shortcut_for_a_table_and_the_modules_otherwise(tokenizer, table, monkeypatch):
    def refuse(self, features):
        raise AssertionError("the modules ran")

    monkeypatch.setattr(StaticEmbedding, "forward", refuse)
    bare = Encoder([StaticEmbedding(tokenizer, table), Normalize()])
    expected = np.stack([table[tokenizer.encode(t, add_special_tokens=False).ids].mean(0) for t in TEXTS])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(bare.encode(TEXTS, batch_size=2), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="the modules ran"):  # a Dense after the table: the modules run
        Encoder([StaticEmbedding(tokenizer, table), Dense(12, 4)]).encode(TEXTS)
    long = "word " * 200_000  # (1, tokens, 12) rows past NUMPY_ROWS floats: embedding_bag, not a copy of them
    with pytest.raises(AssertionError, match="the modules ran"):
        bare.encode(long)
    with warnings.catch_warnings(), pytest.raises(AssertionError, match="the modules ran"):  # bf16: the modules
        warnings.simplefilter("ignore")  # bf16 emulated on this CPU (or not): beside the point here
        bare.use_backend("torch", precision="bf16").encode(TEXTS)
