"""The sentence-transformers folder format: round trips both ways, atomic saves, errors naming the path."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from conftest import slow_fixture
from torch import nn

import sbert
from sbert.encoder import Encoder
from sbert.errors import ModelFormatError, ModelNotFoundError
from sbert.modules import Dense, Normalize, Pooling

TEXTS = ["A man is playing a flute.", "Two dogs run through a field of tall grass.", "Stocks fell sharply."]


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    return model.save(tmp_path_factory.mktemp("models") / "ours")


@pytest.fixture()
def dense_model(model):
    torch.manual_seed(0)
    dense = Dense(384, 64, activation=nn.Tanh())
    return Encoder([model.transformer, Pooling(384, "max"), dense, Normalize()])


def test_save_then_load_gives_identical_embeddings(model, saved):
    assert json.loads((saved / "modules.json").read_text())[1]["path"] == "1_Pooling"
    again = sbert.load(saved, device="cpu")
    assert again.describe()["modules"] == model.describe()["modules"]
    np.testing.assert_array_equal(again.encode(TEXTS), model.encode(TEXTS))


def test_our_folder_loads_in_sentence_transformers(model, saved):
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(saved), device="cpu").encode(TEXTS)
    assert np.abs(theirs - model.encode(TEXTS)).max() <= 1e-5


def test_dense_and_max_pooling_round_trip_through_sentence_transformers(dense_model, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    path = dense_model.save(tmp_path / "dense")
    ours = dense_model.encode(TEXTS)
    assert ours.shape == (3, 64) and dense_model.dim == 64
    np.testing.assert_array_equal(sbert.load(path, device="cpu").encode(TEXTS), ours)
    theirs = st.SentenceTransformer(str(path), device="cpu").encode(TEXTS)
    assert np.abs(theirs - ours).max() <= 1e-5


def test_sentence_transformers_folder_loads_in_ours(reference, model, tmp_path):
    reference.save(str(tmp_path / "st"))
    ours = sbert.load(tmp_path / "st", device="cpu")
    assert ours.dim == 384 and ours.max_seq_length == 256
    assert np.abs(ours.encode(TEXTS) - reference.encode(TEXTS)).max() <= 1e-5


def test_plain_huggingface_folder_gets_mean_pooling(model, tmp_path):
    model.transformer.model.save_pretrained(tmp_path / "hf")
    model.transformer.tokenizer.save_pretrained(tmp_path / "hf")
    plain = sbert.load(tmp_path / "hf", device="cpu")
    assert [type(m).__name__ for m in plain] == ["Transformer", "Pooling"]
    # The default model is mean pooling + Normalize, so normalising the plain output must match it.
    np.testing.assert_allclose(plain.encode(TEXTS, normalize=True), model.encode(TEXTS), atol=1e-6)


def test_pickle_weights_only_when_allowed(model, tmp_path):
    folder = tmp_path / "pickled"
    model.transformer.model.config.save_pretrained(folder)
    model.transformer.tokenizer.save_pretrained(folder)
    torch.save(model.transformer.model.state_dict(), folder / "pytorch_model.bin")
    with pytest.raises(ModelFormatError, match=r"pickle form \(pytorch_model.bin\).*allow_pickle=True"):
        sbert.load(folder)
    loaded = sbert.load(folder, allow_pickle=True, device="cpu")
    np.testing.assert_allclose(loaded.encode(TEXTS, normalize=True), model.encode(TEXTS), atol=1e-6)


def test_dense_pickle_weights_refused(dense_model, tmp_path):
    path = dense_model.save(tmp_path / "d")
    state = {k: torch.from_numpy(np.asarray(v)) for k, v in dense_model[2].state_dict().items()}
    (path / "2_Dense" / "model.safetensors").unlink()
    torch.save(state, path / "2_Dense" / "pytorch_model.bin")
    with pytest.raises(ModelFormatError, match=r"2_Dense: weights are only in pickle form"):
        sbert.load(path)
    assert sbert.load(path, allow_pickle=True, device="cpu").dim == 64


def test_missing_model_names_the_path(tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"nowhere: no such model folder.*never downloads"):
        sbert.load(tmp_path / "nowhere")
    with pytest.raises(ModelNotFoundError, match=r"no such model folder"):
        sbert.load("someone/some-model")


def test_empty_folder_says_what_was_expected(tmp_path):
    with pytest.raises(ModelFormatError, match=r"expected modules.json .* or config.json"):
        sbert.load(tmp_path)


def test_malformed_folders(saved, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(saved, bad)
    (bad / "modules.json").write_text("[{")
    with pytest.raises(ModelFormatError, match=r"modules.json: not valid JSON"):
        sbert.load(bad)
    (bad / "modules.json").write_text(json.dumps([{"idx": 0, "path": "", "type": "my_pkg.Evil"}]))
    with pytest.raises(ModelFormatError, match=r"'my_pkg.Evil' is not supported"):
        sbert.load(bad)
    shutil.copy(saved / "modules.json", bad / "modules.json")
    (bad / "1_Pooling" / "config.json").write_text('{"word_embedding_dimension": 384}')
    with pytest.raises(ModelFormatError, match=r"1_Pooling/config.json: no pooling mode"):
        sbert.load(bad)
    (bad / "model.safetensors").unlink()
    with pytest.raises(ModelFormatError, match=r"no transformer weights"):
        sbert.load(bad)


def test_untrusted_activation_is_refused(dense_model, tmp_path):
    path = dense_model.save(tmp_path / "d")
    config = json.loads((path / "2_Dense" / "config.json").read_text())
    config["activation_function"] = "os.system"
    (path / "2_Dense" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFormatError, match=r"'os.system' is not a torch.nn activation"):
        sbert.load(path)


def test_failed_save_leaves_the_old_folder_and_no_litter(model, saved, tmp_path, monkeypatch):
    target = tmp_path / "target"
    model.save(target)
    before = sorted(p.name for p in target.rglob("*"))

    def boom(self, path):
        raise OSError("disk full")

    monkeypatch.setattr(Pooling, "save", boom)
    with pytest.raises(OSError, match=r"disk full"):
        model.save(target)
    assert sorted(p.name for p in target.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir()] == ["target"]


def test_save_replaces_a_model_folder_but_keeps_the_users_files(model, tmp_path):
    from sbert.atomic import FolderNotReplaceableError

    target = tmp_path / "m"
    model.save(target)
    (target / "notes.txt").write_text("mine")
    model.save(target)
    assert (target / "notes.txt").read_text() == "mine" and (target / "modules.json").is_file()
    other = tmp_path / "docs"
    other.mkdir()
    (other / "thesis.txt").write_text("old")
    with pytest.raises(FolderNotReplaceableError, match=r"docs is a folder that holds other files \(thesis.txt\)"):
        model.save(other)
    assert [p.name for p in other.iterdir()] == ["thesis.txt"]


# -- damaged, poisoned and escaping folders (issue 13, section 11) ---------------------------------------------
@slow_fixture()
def tiny_dense_folder(tmp_path):
    from conftest import make_tiny_encoder

    encoder = make_tiny_encoder(dropout=0.0)
    encoder.append(Dense(16, 8))
    return encoder.save(tmp_path / "tiny")


@pytest.mark.parametrize("weights", ["model.safetensors", "2_Dense/model.safetensors"])
def test_truncated_or_empty_weights_name_the_file(tiny_dense_folder, weights):
    target = tiny_dense_folder / weights
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match=rf"{weights}: damaged weights file .* the file is truncated"):
        sbert.load(tiny_dense_folder, device="cpu")
    target.write_bytes(b"")
    with pytest.raises(ModelFormatError, match=rf"{weights}: damaged weights file \(0 bytes\): empty or truncated"):
        sbert.load(tiny_dense_folder, device="cpu")


@pytest.mark.slow
def test_truncated_pickle_weights_name_the_folder(tiny_dense_folder):
    encoder = sbert.load(tiny_dense_folder, device="cpu")
    (tiny_dense_folder / "model.safetensors").unlink()
    torch.save(encoder[0].model.state_dict(), tiny_dense_folder / "pytorch_model.bin")
    data = (tiny_dense_folder / "pytorch_model.bin").read_bytes()
    (tiny_dense_folder / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match=r"tiny: cannot load the transformer or its tokenizer: .*zip archive"):
        sbert.load(tiny_dense_folder, allow_pickle=True, device="cpu")


@pytest.mark.slow
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_at_load_naming_the_file(tmp_path, bad):
    from conftest import make_tiny_encoder
    from safetensors.torch import load_file, save_file

    def poison(file, name, where):  # saving refuses such weights: the saved file is changed instead
        weights = load_file(file)
        weights[name][where] = bad
        save_file(weights, file, metadata={"format": "pt"})

    encoder = make_tiny_encoder(dropout=0.0)
    encoder.append(Dense(16, 8))
    path = encoder.save(tmp_path / "poisoned")
    poison(path / "model.safetensors", "encoder.layer.0.output.dense.weight", (3, 2))
    with pytest.raises(ModelFormatError, match=r"poisoned/model.safetensors: weight '.*dense.weight' holds 1 NaN"):
        sbert.load(path, device="cpu")
    path = encoder.save(tmp_path / "dense")
    poison(path / "2_Dense" / "model.safetensors", "linear.bias", 1)
    with pytest.raises(ModelFormatError, match=r"2_Dense/model.safetensors: weight 'linear.bias' holds 1 NaN"):
        sbert.load(path, device="cpu")


@pytest.mark.parametrize("module_path", ["../elsewhere", "/etc", "1_Pooling/../../x", "~/x", "C:\\models\\x"])
def test_module_paths_leaving_the_folder_are_refused(tiny_dense_folder, module_path):
    entries = json.loads((tiny_dense_folder / "modules.json").read_text())
    entries[1]["path"] = module_path
    (tiny_dense_folder / "modules.json").write_text(json.dumps(entries))
    with pytest.raises(ModelFormatError, match=r"modules.json: module path .* leaves the model folder"):
        sbert.load(tiny_dense_folder, device="cpu")


@pytest.mark.slow
def test_links_leading_outside_the_folder_are_refused(tiny_dense_folder, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    weights = tiny_dense_folder / "model.safetensors"
    weights.rename(outside / "model.safetensors")
    weights.symlink_to(outside / "model.safetensors")
    with pytest.raises(ModelFormatError, match=r"tiny/model.safetensors: a symbolic link to .*outside the model"):
        sbert.load(tiny_dense_folder, device="cpu")
    # A link that stays inside the folder is fine.
    weights.unlink()
    (outside / "model.safetensors").rename(tiny_dense_folder / "real.safetensors")
    weights.symlink_to("real.safetensors")
    assert sbert.load(tiny_dense_folder, device="cpu").dim == 8
    # A module folder that is a link to a folder outside.
    shutil.move(tiny_dense_folder / "2_Dense", outside / "2_Dense")
    (tiny_dense_folder / "2_Dense").symlink_to(outside / "2_Dense")
    with pytest.raises(ModelFormatError, match=r"2_Dense: a symbolic link to .*outside the model folder"):
        sbert.load(tiny_dense_folder, device="cpu")


@pytest.mark.slow
def test_hub_cache_layout_links_into_its_blobs_are_allowed(tiny_dense_folder, tmp_path):
    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot = repo / "snapshots" / "abc123"
    shutil.copytree(tiny_dense_folder, snapshot)
    (repo / "blobs").mkdir()
    (snapshot / "model.safetensors").rename(repo / "blobs" / "deadbeef")
    (snapshot / "model.safetensors").symlink_to("../../blobs/deadbeef")
    assert sbert.load(snapshot, device="cpu").dim == 8
