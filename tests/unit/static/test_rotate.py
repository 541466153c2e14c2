"""``sbert rotate``: a model turned onto the principal axes of its vectors of a corpus (``sbert.static.rotate``)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import TINY_WORDS, make_tiny_encoder

import sbert
from sbert.cli import main
from sbert.similarity import cosine
from sbert.static.rotate import principal_rotation, rotated, variance_kept


def corpus_texts(n: int = 40) -> list[str]:
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(TINY_WORDS, size=int(rng.integers(2, 9)))) for _ in range(n)]


def test_the_principal_axes_of_a_hand_made_cloud():
    # centred: (0, 2.75), (0, -2.25), (1, -0.25), (-1, -0.25): variance 12.75 along y, 2 along x, no covariance;
    # each axis signed so that its largest score is positive (2.75 on y; 1 before -1 on x)
    vectors = np.array([[0.0, 3.0], [0.0, -2.0], [1.0, 0.0], [-1.0, 0.0]])
    rotation = principal_rotation(vectors)
    assert np.allclose(rotation, [[0.0, 1.0], [1.0, 0.0]])
    kept = variance_kept(vectors, rotation, widths=[1])
    assert kept[1] == pytest.approx((2 / 14.75, 12.75 / 14.75))


def test_the_rotation_is_orthogonal_and_puts_the_most_variance_first():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(200, 8)) * np.array([0.1, 0.2, 3.0, 0.3, 2.0, 0.5, 1.0, 0.05]) + 4.0
    rotation = principal_rotation(vectors)
    assert np.allclose(rotation @ rotation.T, np.eye(8), atol=1e-10)
    spread = ((vectors - vectors.mean(axis=0)) @ rotation.T).var(axis=0)
    assert np.all(np.diff(spread) <= 1e-12)  # most variance first
    for k, (plain, turned) in variance_kept(vectors, rotation, widths=[1, 2, 4]).items():
        assert turned >= plain and turned > 0.5 * k / 4


def test_fewer_vectors_than_dimensions_are_refused():
    with pytest.raises(ValueError, match="at least 8 texts, got 5"):
        principal_rotation(np.ones((5, 8)))


def test_a_rotated_model_keeps_every_cosine_and_truncates_onto_the_axes(tmp_path):
    texts = corpus_texts()
    encoder = make_tiny_encoder().eval()
    before = encoder.encode(texts)
    rotation = principal_rotation(before)
    model = rotated(make_tiny_encoder().eval(), rotation)
    after = model.encode(texts)
    assert np.allclose(after, before @ rotation.T, atol=1e-5)
    assert np.allclose(cosine(after, after), cosine(before, before), atol=1e-5)
    assert np.allclose(model.encode(texts, truncate_dim=3), (before @ rotation.T)[:, :3], atol=1e-5)

    loaded = sbert.load(model.save(tmp_path / "rotated"), device="cpu")
    assert np.allclose(loaded.encode(texts), after, atol=1e-6)
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(tmp_path / "rotated"), device="cpu")
    assert np.allclose(reference.encode(texts), after, atol=1e-5)


def test_a_rotation_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"must be \(16, 16\)"):
        rotated(make_tiny_encoder(), np.eye(8))


def test_sbert_rotate_end_to_end(tmp_path):
    base = make_tiny_encoder().eval().save(tmp_path / "tiny")
    texts = corpus_texts()
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": str(i), "title": "", "text": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp_path / "rotated"
    result = CliRunner().invoke(
        main, ["rotate", str(base), "--corpus", str(corpus), "--out", str(out), "--truncate-dim", "4", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "rotated onto the principal axes of 40 documents" in result.output
    model = sbert.load(out, device="cpu")
    assert model.truncate_dim == 4 and model.model_dim == 16
    before = sbert.load(base, device="cpu").encode(texts)
    expected = (before @ principal_rotation(before).T)[:, :4]
    assert np.allclose(model.encode(texts), expected, atol=1e-5)


def test_sbert_rotate_refuses_too_small_a_corpus_naming_it(tmp_path):
    base = make_tiny_encoder().eval().save(tmp_path / "tiny")
    corpus = tmp_path / "few.txt"
    corpus.write_text("\n".join(corpus_texts(10)) + "\n")
    result = CliRunner().invoke(main, ["rotate", str(base), "--corpus", str(corpus), "--out", str(tmp_path / "o")])
    assert result.exit_code != 0
    assert "few.txt: 10 documents" in result.output and "need at least 16" in result.output
    assert not (tmp_path / "o").exists()
    export = tmp_path / "few.csv"  # a CSV is read by its columns, as `index build` reads it
    export.write_text("key,body\n" + "".join(f"{i},{text}\n" for i, text in enumerate(corpus_texts(3))))
    args = ["rotate", str(base), "--corpus", str(export), "--out", str(tmp_path / "o"), "--text-column", "body"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0 and "few.csv: 3 documents" in result.output


@pytest.mark.parametrize(
    ("option", "message"),
    [(["--max-texts", "8"], "max_texts=8: .* need at least 16 documents"), (["--truncate-dim", "17"], "from 1 to 16")],
)
def test_sbert_rotate_refuses_bad_options_before_embedding_anything(tmp_path, monkeypatch, option, message):
    base = make_tiny_encoder().eval().save(tmp_path / "tiny")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(corpus_texts()) + "\n")

    def no_embedding(*args, **kwargs):
        raise AssertionError("embedded the corpus before checking the options")

    monkeypatch.setattr(sbert.Encoder, "encode_document", no_embedding)
    out = tmp_path / "o"
    result = CliRunner().invoke(main, ["rotate", str(base), "--corpus", str(corpus), "--out", str(out), *option])
    assert result.exit_code != 0
    assert re.search(message, result.output), result.output
    assert not out.exists()
