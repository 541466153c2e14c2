"""Crafted model folders: a missing tokenizer, sizes that would allocate terabytes, headers that lie, pickled
payloads, activations and paths that are not what they claim. Each is refused at load with one line naming
the file (and the field) at fault, before anything large is made and without running code."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from conftest import slow_fixture

import sbert
from sbert.cli import main
from sbert.errors import ModelFormatError


@slow_fixture(scope="module")
def saved_tiny(tmp_path_factory) -> Path:
    """A tiny BERT + mean pooling + Dense(16 -> 8) folder, saved once."""
    from conftest import make_tiny_encoder

    from sbert.modules import Dense

    encoder = make_tiny_encoder(dropout=0.0)
    encoder.append(Dense(16, 8))
    return encoder.save(tmp_path_factory.mktemp("saved") / "tiny")


@pytest.fixture()
def tiny_dense_folder(saved_tiny: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(saved_tiny, tmp_path / "tiny"))


@pytest.fixture()
def texts(tmp_path: Path) -> Path:
    path = tmp_path / "two.txt"
    path.write_text("a cat\na dog\n", encoding="utf-8")
    return path


def _edit(file: Path, **changes) -> None:
    config = json.loads(file.read_text(encoding="utf-8"))
    config.update(changes)
    file.write_text(json.dumps(config), encoding="utf-8")


def _refused(folder: Path, texts: Path, *extra: str) -> str:
    """``sbert encode`` on ``folder``: the one-line error it ends with (no traceback, exit status 1)."""
    result = CliRunner().invoke(main, ["encode", str(texts), "--model", str(folder), *extra])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("Error: ") and "Traceback" not in result.output
    return lines[-1]


def _rewrite_header(file: Path, change) -> None:
    """Rewrite a safetensors header in place (``change(header)``), keeping its length and the data."""
    raw = file.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    change(header)
    new = json.dumps(header, separators=(",", ":")).encode()
    assert len(new) <= size
    file.write_bytes(raw[:8] + new + b" " * (size - len(new)) + raw[8 + size :])


# -- the tokenizer -----------------------------------------------------------------------------------------
def test_a_folder_without_tokenizer_files_is_refused_naming_what_is_missing(tiny_dense_folder, texts):
    (tiny_dense_folder / "tokenizer.json").unlink()
    line = _refused(tiny_dense_folder, texts)
    assert f"{tiny_dense_folder}: cannot build the tokenizer from the folder's own files" in line
    assert "tokenizer.json is missing" in line and "[UNK]" in line


def test_a_vocab_txt_alone_still_builds_a_word_piece_tokenizer(tiny_dense_folder):
    vocab = json.loads((tiny_dense_folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    (tiny_dense_folder / "tokenizer.json").unlink()
    words = sorted(vocab, key=vocab.get)
    (tiny_dense_folder / "vocab.txt").write_text("".join(w + "\n" for w in words), encoding="utf-8")
    ids, _ = sbert.load(tiny_dense_folder, device="cpu").transformer.tokenize(["a cat"])
    assert ids == [[vocab["[CLS]"], vocab["a"], vocab["cat"], vocab["[SEP]"]]]


def test_an_empty_vocabulary_is_refused_naming_the_file_that_holds_it(tiny_dense_folder, texts):
    (tiny_dense_folder / "tokenizer.json").unlink()
    (tiny_dense_folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    line = _refused(tiny_dense_folder, texts)
    assert "its tokenizer files (vocab.txt) hold no word pieces" in line


def test_a_tokenizer_larger_than_the_embedding_table_is_refused(tiny_dense_folder, texts):
    from safetensors.torch import load_file, save_file

    weights = tiny_dense_folder / "model.safetensors"
    state = load_file(str(weights))
    key = next(k for k in state if k.endswith("word_embeddings.weight"))
    state[key] = state[key][:1000].contiguous()
    save_file(state, str(weights))
    _edit(tiny_dense_folder / "config.json", vocab_size=1000)
    line = _refused(tiny_dense_folder, texts)
    assert (
        f"{tiny_dense_folder}: the tokenizer has 30,522 word pieces, but the model's embedding table has 1,000" in line
    )


# -- sizes checked before anything is made -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("file", "field", "value"),
    [
        ("2_Dense/config.json", "in_features", 10**6),
        ("2_Dense/config.json", "out_features", 10**6),
        ("2_Dense/config.json", "in_features", "abc"),
        ("1_Pooling/config.json", "word_embedding_dimension", 10**12),
        ("1_Pooling/config.json", "word_embedding_dimension", -1),
    ],
)
def test_sizes_outside_any_model_are_refused_naming_file_and_field(tiny_dense_folder, texts, file, field, value):
    _edit(tiny_dense_folder / file, **{field: value})
    line = _refused(tiny_dense_folder, texts)
    assert line.startswith(f"Error: {tiny_dense_folder / file}: {field!r} must be a whole number from 1 to")


def test_dense_sizes_are_checked_against_the_weights_before_the_layer_is_made(tiny_dense_folder, texts, monkeypatch):
    _edit(tiny_dense_folder / "2_Dense/config.json", in_features=60_000, out_features=60_000)
    made = []
    monkeypatch.setattr(torch.nn.Linear, "reset_parameters", lambda self: made.append(self.weight.shape))
    line = _refused(tiny_dense_folder, texts)
    assert f"{tiny_dense_folder / '2_Dense/model.safetensors'}: tensor 'linear.weight' has shape [8, 16]" in line
    assert "in_features 60000, out_features 60000" in line
    assert torch.Size([60_000, 60_000]) not in made


def test_a_pooling_width_other_than_the_transformer_s_is_refused(tiny_dense_folder, texts):
    _edit(tiny_dense_folder / "1_Pooling/config.json", word_embedding_dimension=32)
    line = _refused(tiny_dense_folder, texts)
    assert f"{tiny_dense_folder / '1_Pooling/config.json'}: 'word_embedding_dimension' is 32" in line
    assert "(Transformer) gives vectors 16 wide" in line


def test_a_guide_folder_is_checked_the_same_way(tiny_dense_folder):
    from sbert.losses.teachers import load_teacher

    _edit(tiny_dense_folder / "2_Dense/config.json", in_features=10**6, out_features=10**6)
    with pytest.raises(ModelFormatError, match=r"2_Dense/config.json: 'in_features' must be a whole number"):
        load_teacher(tiny_dense_folder)


# -- headers, pickles, activations, paths, lengths, tables -----------------------------------------------------
@pytest.mark.parametrize("weights", ["model.safetensors", "2_Dense/model.safetensors"])
def test_a_safetensors_header_whose_shapes_disagree_with_its_offsets_is_named(tiny_dense_folder, texts, weights):
    def grow(header):
        name = next(k for k in header if k != "__metadata__" and len(header[k]["shape"]) == 2)
        header[name]["shape"][0] += 1

    _rewrite_header(tiny_dense_folder / weights, grow)
    line = _refused(tiny_dense_folder, texts)
    assert f"{tiny_dense_folder / weights}: damaged weights file" in line and "its data_offsets span" in line


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("where", ["", "2_Dense"])
def test_a_pickled_payload_is_refused_with_allow_pickle_too(tiny_dense_folder, texts, tmp_path, where):
    folder = tiny_dense_folder / where
    marker = tmp_path / "ran"
    (folder / "model.safetensors").unlink()
    torch.save({"linear.weight": _Payload(marker)}, folder / "pytorch_model.bin")
    line = _refused(tiny_dense_folder, texts, "--allow-pickle")
    assert f"{folder / 'pytorch_model.bin'}: refused: it holds Python objects other than tensors" in line
    assert "posix.system" in line and not marker.exists()


@pytest.mark.parametrize("name", ["torch.nn.Module", "torch.nn.modules.linear.Linear", "torch.nn.MultiheadAttention"])
def test_an_activation_that_is_not_one_is_refused_at_load(tiny_dense_folder, texts, name):
    _edit(tiny_dense_folder / "2_Dense/config.json", activation_function=name)
    line = _refused(tiny_dense_folder, texts)
    assert line.startswith(f"Error: {tiny_dense_folder / '2_Dense/config.json'}: 'activation_function' {name!r}")


def test_torch_s_own_activations_still_load(tiny_dense_folder):
    for name in ("torch.nn.modules.activation.GELU", "torch.nn.Identity", "torch.nn.modules.linear.Identity"):
        _edit(tiny_dense_folder / "2_Dense/config.json", activation_function=name)
        assert sbert.load(tiny_dense_folder, device="cpu").encode("a cat").shape == (8,)


def test_a_nul_byte_in_a_module_path_is_named(tiny_dense_folder, texts):
    modules = json.loads((tiny_dense_folder / "modules.json").read_text(encoding="utf-8"))
    modules[1]["path"] = "1_Pooling\x00evil"
    (tiny_dense_folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    line = _refused(tiny_dense_folder, texts)
    assert line.startswith(f"Error: {tiny_dense_folder / 'modules.json'}: module 'path'")
    assert "control character" in line


@pytest.mark.parametrize("value", [-5, 1, "long"])
def test_a_bad_saved_max_seq_length_is_named(tiny_dense_folder, texts, value):
    _edit(tiny_dense_folder / "sentence_bert_config.json", max_seq_length=value)
    line = _refused(tiny_dense_folder, texts)
    assert line.startswith(f"Error: {tiny_dense_folder / 'sentence_bert_config.json'}: 'max_seq_length' must be")


def test_a_model2vec_table_without_columns_is_refused(tiny_dense_folder, texts, tmp_path):
    from safetensors.torch import save_file

    folder = tmp_path / "m2v"
    folder.mkdir()
    shutil.copy(tiny_dense_folder / "tokenizer.json", folder / "tokenizer.json")
    vocab = len(json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"])
    save_file({"embeddings": torch.zeros(vocab, 0)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec", "normalize": True}), encoding="utf-8")
    line = _refused(folder, texts)
    assert line.startswith(f"Error: {folder / 'model.safetensors'}: the embedding table has 0 columns")
