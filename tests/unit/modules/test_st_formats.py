"""Settings of sentence-transformers 6 folders that must load with the same results, and survive a save:
several pooling modes in their stored order, ``truncate_dim``, a cross-encoder's activation in
config_sentence_transformers.json, and every other key of that file (prompts, ...)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import make_tiny_encoder
from test_remote_code import tiny_cross_encoder_folder
from torch import nn

import sbert
from sbert.cross_encoder import CrossEncoder
from sbert.errors import ModelFormatError
from sbert.modules import Normalize

pytestmark = pytest.mark.slow  # loads models beside sentence-transformers

st = pytest.importorskip("sentence_transformers")

TEXTS = ["A man is playing a flute.", "Two dogs run through a field of tall grass.", "Stocks fell sharply."]
PAIRS = [("A man eats food.", "Someone is eating."), ("A cat sleeps.", "The stock market fell sharply today.")]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    """A tiny BERT + mean pooling + Normalize, saved by sbert (random weights: equivalence is what counts)."""
    encoder = make_tiny_encoder(dropout=0.0)
    encoder.append(Normalize())
    return encoder.save(tmp_path_factory.mktemp("tiny") / "model")


def _st_config(folder: Path) -> dict:
    return json.loads((folder / "config_sentence_transformers.json").read_text(encoding="utf-8"))


# -- several pooling modes ---------------------------------------------------------------------------------
def test_mean_max_pooling_and_dense_folder_of_sentence_transformers_gives_the_same_vectors(model, tmp_path):
    """A folder written by sentence-transformers 6 with pooling ("mean", "max") + Dense, read by sbert,
    re-saved by sbert and read back by sentence-transformers: the same vectors at every step."""
    from sentence_transformers.sentence_transformer import modules as stm

    transformer = stm.Transformer(str(model.path))
    pooling = stm.Pooling(384, ("mean", "max"))
    torch.manual_seed(0)
    dense = stm.Dense(768, 64, activation_function=nn.Tanh())
    theirs = st.SentenceTransformer(modules=[transformer, pooling, dense, stm.Normalize()], device="cpu")
    theirs.save(str(tmp_path / "st"))
    expected = theirs.encode(TEXTS)

    ours = sbert.load(tmp_path / "st", device="cpu")
    assert ours[1].modes == ["mean", "max"] and ours.dim == 64
    assert np.abs(ours.encode(TEXTS) - expected).max() <= 1e-5

    ours.save(tmp_path / "again")
    pooling_config = json.loads((tmp_path / "again" / "1_Pooling" / "config.json").read_text())
    assert pooling_config["pooling_mode"] == ["mean", "max"]
    again = st.SentenceTransformer(str(tmp_path / "again"), device="cpu").encode(TEXTS)
    assert np.abs(again - expected).max() <= 1e-5


# -- truncate_dim -------------------------------------------------------------------------------------------
def test_truncate_dim_of_a_sentence_transformers_folder_is_honoured(tiny_folder, tmp_path):
    theirs = st.SentenceTransformer(str(tiny_folder), device="cpu", truncate_dim=8)
    theirs.save(str(tmp_path / "st"))
    assert _st_config(tmp_path / "st")["truncate_dim"] == 8

    ours = sbert.load(tmp_path / "st", device="cpu")
    assert ours.dim == 8 and ours.model_dim == 16 and ours.truncate_dim == 8
    assert ours.encode(TEXTS).shape == (3, 8) and ours.encode("one").shape == (8,)
    np.testing.assert_allclose(ours.encode(TEXTS), theirs.encode(TEXTS), atol=1e-6)
    # normalising happens after truncating, as sentence-transformers does
    normalized = ours.encode(TEXTS, normalize=True)
    np.testing.assert_allclose(normalized, theirs.encode(TEXTS, normalize_embeddings=True), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(ours.encode(TEXTS, truncate_dim=4), theirs.encode(TEXTS, truncate_dim=4), atol=1e-6)
    assert sbert.load(tmp_path / "st", device="cpu", truncate_dim=4).encode(TEXTS).shape == (3, 4)

    ours.save(tmp_path / "again")
    assert _st_config(tmp_path / "again")["truncate_dim"] == 8
    reread = st.SentenceTransformer(str(tmp_path / "again"), device="cpu")
    assert reread.truncate_dim == 8
    np.testing.assert_allclose(reread.encode(TEXTS), ours.encode(TEXTS), atol=1e-6)


def test_bad_truncate_dim_is_refused(tiny_folder, tmp_path):
    import shutil

    folder = Path(shutil.copytree(tiny_folder, tmp_path / "bad"))
    config = _st_config(folder) | {"truncate_dim": 999}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    with pytest.raises(ModelFormatError, match=r"config_sentence_transformers.json: truncate_dim must be .* 1 to 16"):
        sbert.load(folder, device="cpu")
    good = sbert.load(tiny_folder, device="cpu")
    with pytest.raises(ValueError, match=r"truncate_dim must be an integer from 1 to 16"):
        good.encode(TEXTS, truncate_dim=0)


# -- settings sbert does not use are kept -------------------------------------------------------------------
def test_prompts_and_unknown_settings_survive_a_save(tiny_folder, tmp_path):
    import shutil

    folder = Path(shutil.copytree(tiny_folder, tmp_path / "prompts"))
    written = _st_config(folder) | {
        "prompts": {"query": "query: ", "passage": ""},
        "default_prompt_name": "query",
        "model_type": "SentenceTransformer",
        "similarity_fn_name": "dot",
        "some_future_setting": {"keep": [1, 2, 3]},
    }
    written["__version__"]["sentence_transformers"] = "6.2.0"
    (folder / "config_sentence_transformers.json").write_text(json.dumps(written))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default prompt is applied now (test_prompts.py), not warned about
        ours = sbert.load(folder, device="cpu")
    assert ours.prompts == written["prompts"] and ours.default_prompt_name == "query"
    assert ours.similarity_fn_name == "dot"

    ours.save(tmp_path / "again")
    saved = _st_config(tmp_path / "again")
    assert {k: v for k, v in saved.items() if k != "__version__"} == {
        k: v for k, v in written.items() if k != "__version__"
    }
    assert saved["__version__"]["sentence_transformers"] == "6.2.0" and saved["__version__"]["sbert"]
    reread = st.SentenceTransformer(str(tmp_path / "again"), device="cpu")
    assert written["prompts"].items() <= reread.prompts.items() and reread.default_prompt_name == "query"


# -- cross-encoder activation -------------------------------------------------------------------------------
def test_identity_activation_saved_by_sentence_transformers_is_read(tmp_path):
    base = tiny_cross_encoder_folder(tmp_path / "base")
    theirs = st.CrossEncoder(str(base), activation_fn=nn.Identity(), device="cpu")
    theirs.save(str(tmp_path / "st"))
    assert _st_config(tmp_path / "st")["activation_fn"] == "torch.nn.modules.linear.Identity"
    expected = theirs.predict(PAIRS)

    ours = CrossEncoder.load(tmp_path / "st", device="cpu")
    assert ours.activation == "identity"
    np.testing.assert_allclose(ours.predict(PAIRS), expected, atol=1e-5)


@pytest.mark.parametrize(("labels", "activation"), [(1, "identity"), (1, "sigmoid"), (3, "softmax")])
def test_activation_saved_by_sbert_is_read_by_sentence_transformers(tmp_path, labels, activation):
    base = tiny_cross_encoder_folder(tmp_path / "base", num_labels=labels)
    ours = CrossEncoder.load(base, activation=activation, device="cpu")
    ours.settings = {"prompts": {"q": "query: "}, "custom": 1}
    ours.save(tmp_path / "ours")
    assert _st_config(tmp_path / "ours")["custom"] == 1
    assert CrossEncoder.load(tmp_path / "ours", device="cpu").activation == activation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: Softmax's implicit dimension
        theirs = st.CrossEncoder(str(tmp_path / "ours"), device="cpu").predict(PAIRS)
    np.testing.assert_allclose(ours.predict(PAIRS), theirs, atol=1e-5)


def test_unknown_cross_encoder_activation_is_refused(tmp_path):
    base = tiny_cross_encoder_folder(tmp_path / "base")
    theirs = st.CrossEncoder(str(base), activation_fn=nn.Tanh(), device="cpu")
    theirs.save(str(tmp_path / "st"))
    with pytest.raises(ModelFormatError, match=r"config_sentence_transformers.json \(activation_fn\): activation "):
        CrossEncoder.load(tmp_path / "st", device="cpu")
    assert CrossEncoder.load(tmp_path / "st", activation="identity", device="cpu").activation == "identity"
