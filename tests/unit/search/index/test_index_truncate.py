"""An index of vectors cut to a model's ``truncate_dim`` (Matryoshka): recorded, applied, refused when mixed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer

from sbert.encoder import Encoder
from sbert.errors import IndexMismatchError
from sbert.model_names import resolve
from sbert.modules import StaticEmbedding
from sbert.search.index.folder import VectorIndex


@pytest.fixture(scope="module")
def static() -> Encoder:
    tokenizer = Tokenizer.from_file(str(resolve("default") / "tokenizer.json"))
    table = np.random.default_rng(0).normal(size=(tokenizer.get_vocab_size(), 32)).astype(np.float32)
    return Encoder([StaticEmbedding(tokenizer, table)])


def test_the_truncated_dimension_is_recorded_given_to_models_and_refused_when_mixed(tmp_path, static):
    static.truncate_dim = 8
    texts = ["a cat", "a dog", "the stock market"]
    built = VectorIndex.build(tmp_path / "ix", static.encode(texts), model="default", truncate_dim=8)
    ix = VectorIndex.open(tmp_path / "ix")
    assert ix.truncate_dim == 8 and ix.dim == 8
    static.truncate_dim = None
    ix.fit_truncate_dim(static)  # a model without one takes the index's
    assert static.truncate_dim == 8
    assert ix.search(static.encode(["a cat"]), 1)[0][0].id == built.ids[0]
    static.truncate_dim = 16
    with pytest.raises(IndexMismatchError, match="truncate_dim 8; the model cuts them to 16"):
        ix.fit_truncate_dim(static)
    with pytest.raises(IndexMismatchError, match="8-dim"):
        ix.add(static.encode(["a bird"]))
    with pytest.raises(ValueError, match="truncate_dim 4 does not match the embeddings' 8"):
        VectorIndex.build(tmp_path / "other", np.ones((2, 8), np.float32), model="default", truncate_dim=4)


def test_an_index_built_without_truncation_refuses_a_truncating_model_and_old_indexes_still_open(tmp_path, static):
    VectorIndex.build(tmp_path / "ix", np.ones((2, 32), np.float32), model="default")
    static.truncate_dim = 8
    with pytest.raises(IndexMismatchError, match="truncate_dim None; the model cuts them to 8"):
        VectorIndex.open(tmp_path / "ix").fit_truncate_dim(static)
    manifest_file = next((tmp_path / "ix").glob("manifest*.json"))
    manifest = json.loads(manifest_file.read_text())
    del manifest["truncate_dim"]  # as sbert wrote indexes before it recorded one
    manifest_file.write_text(json.dumps(manifest))
    old = VectorIndex.open(tmp_path / "ix")
    assert old.truncate_dim is None
    old.fit_truncate_dim(static)  # nothing recorded: nothing to check (the width still is)
    assert static.truncate_dim == 8
