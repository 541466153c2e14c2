"""The ONNX Runtime backend: equivalence with torch, the export cache (reuse, corruption, read-only
folders, changed weights), int8, and the switch in load / use_backend / the CLI."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

import sbert
from sbert.backends import onnx as onnx_backend
from sbert.modules import Dense, Normalize

pytestmark = pytest.mark.slow  # exports models to ONNX


@pytest.fixture(scope="module")
def model_copy(tmp_path_factory):
    """The default model copied to a writable folder (exports are cached beside it)."""
    folder = tmp_path_factory.mktemp("model") / "minilm"
    shutil.copytree(sbert.load("default", device="cpu").path, folder, ignore=shutil.ignore_patterns("onnx"))
    return folder


def test_fp32_export_matches_torch_within_1e4(model_copy, stsb_sentences):
    texts = stsb_sentences[:200]
    torch_emb = sbert.load(model_copy, device="cpu").encode(texts, batch_size=16)
    onnx_model = sbert.load(model_copy, device="cpu", backend="onnx")
    assert onnx_model.runtime == "onnx/fp32" and onnx_model.onnx_path.is_file()
    for batch_size, order in ((16, True), (7, False), (1, True)):  # other shapes than the traced example
        emb = onnx_model.encode(texts, batch_size=batch_size, sort_by_length=order)
        assert np.abs(emb - torch_emb).max() <= 1e-4
    single = onnx_model.encode("a single text")
    assert single.shape == (384,) and np.linalg.norm(single) == pytest.approx(1.0, abs=1e-5)  # Normalize inside


def test_whole_encoder_is_exported_with_dense_and_normalize(tmp_path):
    from conftest import make_tiny_encoder

    encoder = make_tiny_encoder(dropout=0.0)
    encoder.append(Dense(16, 8))
    encoder.append(Normalize())
    texts = ["short", "a somewhat longer text for the tiny model", "x y z"]
    expected = encoder.encode(texts)
    encoder.use_backend("onnx", cache_dir=tmp_path)
    assert encoder.encode(texts).shape == (3, 8)
    np.testing.assert_allclose(encoder.encode(texts), expected, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(texts, truncate_dim=4), expected[:, :4], atol=1e-5)
    tokens = encoder.encode(texts, output="token")  # token output stays on torch
    assert tokens[0].shape[1] == 16
    encoder.use_backend("torch")
    assert encoder.runtime == "torch/fp32" and encoder.onnx_path is None


def test_cache_is_reused_then_rebuilt_when_corrupt(model_copy, monkeypatch):
    model = sbert.load(model_copy, device="cpu")
    first = onnx_backend.export(model.export_source())
    assert first.parent == model_copy / "onnx" and first.with_suffix(".json").is_file()
    calls = []
    real = onnx_backend._export_fp32
    monkeypatch.setattr(onnx_backend, "_export_fp32", lambda *a: (calls.append(1), real(*a)))
    assert onnx_backend.export(model.export_source()) == first and calls == []  # reused, not exported again
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    first.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="stale or corrupt"):
        again = onnx_backend.export(model.export_source())
    assert again == first and calls == [1]
    assert onnx_backend.file_sha256(again) == __import__("json").loads(again.with_suffix(".json").read_text())["sha256"]
    assert not list(first.parent.glob(".*tmp*"))  # no temporary files left


def test_changed_weights_get_a_new_export_and_old_one_is_removed(tmp_path):
    from conftest import make_tiny_encoder

    encoder = make_tiny_encoder(dropout=0.0)
    assert encoder.training
    old = onnx_backend.export(encoder.export_source(), cache_dir=tmp_path)
    assert all(module.training for module in encoder.modules())  # traced in evaluation mode, then given back
    with torch.no_grad():
        encoder[0].model.embeddings.word_embeddings.weight[5] += 1.0
    new = onnx_backend.export(encoder.export_source(), cache_dir=tmp_path)
    assert new != old and new.is_file() and not old.exists()


def test_read_only_model_folder_uses_the_cache_folder(model_copy, tmp_path, monkeypatch):
    model = sbert.load(model_copy, device="cpu")
    # The tests may run as root, for whom chmod does not stop writes: simulate the read-only folder.
    monkeypatch.setattr(onnx_backend, "_writable", lambda folder: not str(folder).startswith(str(model_copy)))
    monkeypatch.setenv("SBERT_CACHE", str(tmp_path / "cache"))
    path = onnx_backend.export(model.export_source())
    assert path.parent.parent == tmp_path / "cache" / "onnx"
    assert path.parent.name == f"{model_copy.parent.name}-minilm-{path.parent.name[-12:]}"  # one folder per model


def test_installed_model_exports_to_the_user_cache_and_says_where(tmp_path, monkeypatch, caplog):
    """A model inside site-packages is a package's files: the export goes to $XDG_CACHE_HOME/sbert, logged."""
    from conftest import make_tiny_encoder

    installed = make_tiny_encoder(dropout=0.0).save(tmp_path / "venv" / "lib" / "site-packages" / "pkg" / "model")
    monkeypatch.delenv("SBERT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    encoder = sbert.load(installed, device="cpu")
    with caplog.at_level("WARNING", logger="sbert.backends.onnx"):
        encoder.use_backend("onnx")
    path = encoder.onnx_path
    assert path.is_relative_to(tmp_path / "xdg" / "sbert" / "onnx") and path.parent.name.startswith("pkg-model-")
    assert not (installed / "onnx").exists()
    assert any(str(path) in record.getMessage() for record in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="sbert.backends.onnx"):
        sbert.load(installed, device="cpu").use_backend("onnx")  # reused: nothing new to say
    assert not caplog.records
    monkeypatch.setenv("SBERT_CACHE", str(tmp_path / "mine"))
    assert onnx_backend.cache_folder(encoder.path).parent == tmp_path / "mine" / "onnx"


def test_unsaved_encoders_do_not_remove_each_others_exports(tmp_path, monkeypatch):
    from conftest import make_tiny_encoder

    monkeypatch.setenv("SBERT_CACHE", str(tmp_path))
    first = onnx_backend.export(make_tiny_encoder(seed=0, dropout=0.0).export_source())
    second = onnx_backend.export(make_tiny_encoder(seed=1, dropout=0.0).export_source())
    assert first != second and first.is_file() and second.is_file()


def test_int8_is_close_to_fp32(model_copy, stsb_sentences):
    texts = stsb_sentences[:64]
    fp32 = sbert.load(model_copy, device="cpu").encode(texts)
    int8 = sbert.load(model_copy, device="cpu", backend="onnx", precision="int8").encode(texts)
    cos = (fp32 * int8).sum(axis=1)  # both unit length
    assert cos.min() > 0.95 and cos.mean() > 0.985 and np.abs(fp32 - int8).max() > 1e-4  # quantised, yet close
    assert sorted(p.name.split("-")[1] for p in (model_copy / "onnx").glob("*.onnx")) == ["fp32", "int8"]


def test_bad_backend_arguments(model):
    with pytest.raises(ValueError, match="backend must be"):
        model.use_backend("tensorrt")
    with pytest.raises(ValueError, match="torch precision"):
        model.use_backend("torch", "int8")
    with pytest.raises(ValueError, match="ONNX precision"):
        onnx_backend.export(model.export_source(), "bf16")


def test_cli_backend_option(model_copy, tmp_path):
    from click.testing import CliRunner

    from sbert.cli import main

    source = tmp_path / "in.txt"
    source.write_text("first sentence\nsecond one\n", encoding="utf-8")
    out = tmp_path / "emb.npy"
    result = CliRunner().invoke(
        main, ["encode", str(source), "--out", str(out), "--model", str(model_copy), "--backend", "onnx"]
    )
    assert result.exit_code == 0, result.output
    expected = sbert.load(model_copy, device="cpu").encode(["first sentence", "second one"])
    np.testing.assert_allclose(np.load(out), expected, atol=1e-4)
