"""The seams of the inference pipeline and the one home of each shared policy, without loading a model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sbert.arrays import as_float32, as_tensor
from sbert.errors import ModelFormatError
from sbert.modules.folder import weight_files
from sbert.pipeline import PACKED_TOKENS, Batching, Tokenized, TorchRunner, finish, token_vectors
from sbert.progress import HiddenBar, progress_bar
from sbert.versions import package_version, saved_versions


def test_tokenized_lengths_count_every_token():
    tokens = Tokenized(ids=[[101, 7, 102], [101, 102], [101, 5, 6, 7, 102]], truncated=[2])
    assert tokens.lengths == [3, 2, 5] and len(tokens) == 3
    with pytest.raises(AttributeError):
        tokens.ids = []  # frozen: a service may share one between threads


def test_batching_passes_its_choice_to_smart_batching():
    padded = Batching(collate=lambda ids: {}, packed=False, batch_size=10, max_tokens=12)
    packed = Batching(collate=lambda ids: {}, packed=True, batch_size=10, max_tokens=12)
    lengths = [5, 9, 1, 7, 3]
    assert [b.tolist() for b in padded.batches(lengths)] == [[1], [3], [0, 4], [2]]  # 2 x 7 padded slots > 12
    assert [b.tolist() for b in packed.batches(lengths)] == [[1], [3, 0], [4, 2]]  # 7 + 5 real tokens = 12
    assert PACKED_TOKENS == 8_192


def test_torch_runner_moves_features_and_passes_the_packed_path():
    calls = []

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))

        def forward(self, features, packed=False):
            calls.append(packed)
            return {"sentence_embedding": features["x"].to(self.weight.dtype) * self.weight}

    runner = TorchRunner(Model())
    out = runner.sentences({"x": torch.tensor([[1, 2]])}, packed=True)
    assert calls == [True] and out.dtype == torch.float64 and out.tolist() == [[1.0, 2.0]]
    assert runner.name == "torch" and runner.precision == "fp32"


def test_finish_cuts_then_normalises_and_token_vectors_drop_padding():
    vectors = torch.tensor([[3.0, 4.0, 12.0]])
    np.testing.assert_allclose(finish(vectors, 2, normalize=True), [[0.6, 0.8]], atol=1e-7)
    assert finish(vectors, 3, normalize=False).dtype == np.float32
    features = {
        "token_embeddings": torch.arange(12.0).reshape(2, 3, 2),
        "attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0]]),
    }
    kept = token_vectors(features, normalize=False)
    assert [t.shape for t in kept] == [(2, 2), (1, 2)] and kept[1].tolist() == [[6.0, 7.0]]


@pytest.mark.parametrize(
    ("show", "total", "from_items", "shown"), [(True, 1, 5000, True), (False, 10**6, 0, False), (None, 10, 5000, False)]
)
def test_progress_policy(show, total, from_items, shown):
    with progress_bar(total, "x", show, "text", from_items=from_items) as bar:
        assert bar.disable is not shown


def test_a_hidden_bar_counts_and_takes_what_tqdm_takes():
    bar = progress_bar(10, "x", False, initial=3)
    assert isinstance(bar, HiddenBar)
    with bar:
        bar.update(2)
        bar.update()
        bar.set_postfix(loss="0.1", refresh=False)
        bar.set_description_str("train", refresh=True)
    assert (bar.n, bar.total) == (6, 10)


def test_versions_have_one_spelling_for_missing_packages():
    assert package_version("no-such-package-sbert-test") == "unknown"
    from importlib import metadata

    assert saved_versions() == {
        "sbert": metadata.version("sbert"),
        "transformers": metadata.version("transformers"),
        "pytorch": metadata.version("torch"),
    }


def test_array_conversion_is_shared():
    rows = as_tensor(np.arange(3, dtype=np.int64))
    assert rows.shape == (1, 3) and rows.dtype == torch.float32
    assert as_float32(torch.ones(2, 3, dtype=torch.float64)).dtype == np.float32
    with pytest.raises(ValueError, match=r"expected embeddings of shape \(n, d\) or \(d,\), got shape \(1, 1, 1\)"):
        as_tensor(np.zeros((1, 1, 1)))


def test_pickled_weights_only_when_allowed(tmp_path):
    from safetensors.torch import save_file

    with pytest.raises(ModelFormatError, match=r"empty: no cross-encoder weights \(expected model.safetensors\)"):
        (tmp_path / "empty").mkdir()
        weight_files(tmp_path / "empty", allow_pickle=True, what="cross-encoder weights")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    torch.save({"w": torch.ones(1)}, pickled / "pytorch_model.bin")
    with pytest.raises(ModelFormatError, match=r"pickled: weights are only in pickle form .*allow_pickle=True"):
        weight_files(pickled, allow_pickle=False)
    assert weight_files(pickled, allow_pickle=True) == ([pickled / "pytorch_model.bin"], False)
    save_file({"w": torch.ones(1)}, str(pickled / "model.safetensors"))
    assert weight_files(pickled, allow_pickle=False) == ([pickled / "model.safetensors"], True)  # preferred
