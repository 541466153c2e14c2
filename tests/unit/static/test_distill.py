"""Distilling a static model (``sbert.static.distill``, model2vec's method): rows, PCA, weighting, corpus words, and
the folder ``sbert distill`` writes loading equal in model2vec, sentence-transformers and sbert."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import sbert
from sbert.static.distill import corpus_words, distill, pca, zipf_weights

WORDS = ["getuserbyid", "nullpointerexception"]


@pytest.fixture(scope="module")
def tiny():
    from conftest import make_tiny_encoder

    return make_tiny_encoder(dropout=0.0).eval()


@pytest.fixture(scope="module")
def raw(tiny):
    """The distillation without PCA or weighting: the token rows themselves."""
    return distill(tiny, words=WORDS, dim=None, sif=None, show_progress=False)


def _mean_output(tiny, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        hidden = tiny.transformer.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    return hidden.mean(0).numpy()


def test_each_row_is_the_transformer_s_mean_output_for_its_token_between_special_tokens(tiny, raw):
    tok = tiny.transformer.tokenizer
    table = raw.transformer.embedding.weight.detach().numpy()
    cls, sep = tok.cls_token_id, tok.sep_token_id
    for word in ("cat", "dog", "##ing", "!"):
        token = tok.convert_tokens_to_ids(word)
        np.testing.assert_allclose(table[token], _mean_output(tiny, [cls, token, sep]), atol=1e-5)
    pieces = tok("getuserbyid")["input_ids"]  # [CLS] get ##user ##by ##id [SEP]
    assert len(pieces) > 3
    new = raw.transformer.backend_tokenizer.token_to_id("getuserbyid")
    assert new == tok.vocab_size  # appended after the base vocabulary
    np.testing.assert_allclose(table[new], _mean_output(tiny, pieces), atol=1e-5)
    assert not table[tok.convert_tokens_to_ids("[unused5]")].any()  # left out, as model2vec leaves it out


def test_corpus_words_are_single_tokens_of_the_distilled_tokenizer(raw):
    ids, _ = raw.transformer.tokenize(["getUserById threw a NullPointerException"])
    tokens = [raw.transformer.backend_tokenizer.id_to_token(i) for i in ids[0]]
    assert tokens == ["getuserbyid", "threw", "a", "nullpointerexception"]


def test_pca_keeps_dim_centred_components_in_order_of_variance():
    x = np.random.default_rng(0).normal(size=(500, 10)) * np.arange(10, 0, -1)
    reduced = pca(x.astype(np.float32), 4)
    assert reduced.shape == (500, 4)
    np.testing.assert_allclose(reduced.mean(0), 0, atol=1e-4)
    variances = reduced.var(0)
    assert list(variances) == sorted(variances, reverse=True)
    assert (reduced[np.abs(reduced).argmax(0), range(4)] > 0).all()  # each component's sign as model2vec's
    with pytest.raises(ValueError, match="dim must be from 1 to 10"):
        pca(x, 11)


def test_zipf_weights_grow_with_rank_as_model2vec_s():
    weights = zipf_weights(1000, 1e-4)
    assert (np.diff(weights) > 0).all() and 0 < weights[0] < weights[-1] < 1
    inverse = 1 / np.arange(2, 1002)
    np.testing.assert_allclose(weights, 1e-4 / (1e-4 + inverse / inverse.sum()))


def test_corpus_words_keep_frequent_unknown_words_with_a_letter(tiny):
    texts = ["getUserById failed", "getUserById again", "x9z9q 12345 12345", "the the the"]
    words = corpus_words(texts, tiny.transformer.tokenizer.backend_tokenizer, min_count=2)
    assert words == ["getuserbyid"]
    assert corpus_words(texts, tiny.transformer.tokenizer.backend_tokenizer, min_count=1)[:2] == [
        "getuserbyid",
        "x9z9q",
    ]


@pytest.mark.slow
def test_sbert_distill_writes_a_folder_model2vec_and_sentence_transformers_read_equal(tiny, tmp_path):
    model2vec = pytest.importorskip("model2vec")
    from sentence_transformers import SentenceTransformer

    from sbert.cli import main

    tiny.save(tmp_path / "tiny")
    (tmp_path / "bugs.txt").write_text("getUserById fails\ngetUserById is slow\n", encoding="utf-8")
    args = ["distill", str(tmp_path / "tiny"), "--out", str(tmp_path / "static"), "--dim", "8"]
    result = CliRunner().invoke(main, [*args, "--vocabulary", str(tmp_path / "bugs.txt")])
    assert result.exit_code == 0, result.output
    assert "1 words added from the corpus to 8 dimensions" in result.output
    (tmp_path / "bugs.csv").write_text("key,body\n1,getUserById fails\n2,getUserById is slow\n", encoding="utf-8")
    csv_args = ["distill", str(tmp_path / "tiny"), "--out", str(tmp_path / "from-csv"), "--dim", "8"]
    from_csv = CliRunner().invoke(
        main, [*csv_args, "--vocabulary", str(tmp_path / "bugs.csv"), "--text-column", "body"]
    )
    assert from_csv.exit_code == 0 and "1 words added" in from_csv.output, from_csv.output  # its column, not lines
    texts = ["getUserById fails on a cold cache", "a dog and a cat", "🦜 hello"]
    ours = sbert.load(tmp_path / "static", device="cpu")
    assert ours.dim == 8
    vectors = ours.encode(texts)
    assert np.abs(model2vec.StaticModel.from_pretrained(tmp_path / "static").encode(texts) - vectors).max() <= 1e-6
    st = SentenceTransformer(str(tmp_path / "static"), device="cpu")
    assert np.abs(st.encode(texts[:2]) - vectors[:2]).max() <= 1e-6  # no unknown tokens in these
