"""What every encoder module shares: a features dict in and out, and a folder of its own on disk."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from torch import Tensor, nn

from sbert.errors import ModelFormatError
from sbert.modules.folder import check_finite_tensors, check_safetensors, load_pickled, refuse_pickle

Features = dict[str, Tensor]


class Module(nn.Module):
    """A step of the encoder pipeline.

    ``forward`` takes and returns the features dict (``input_ids``, ``attention_mask``,
    ``token_embeddings``, ``sentence_embedding`` ...). ``save``/``load`` use the folder layout of
    sentence-transformers, so that ``type_name`` in ``modules.json`` is understood by both libraries.
    """

    type_name: ClassVar[str]

    def save(self, path: Path) -> None:
        raise NotImplementedError

    @classmethod
    def load(cls, path: Path, *, allow_pickle: bool = False) -> Module:
        raise NotImplementedError


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def load_weights(
    folder: Path,
    *,
    allow_pickle: bool = False,
    expected: Mapping[str, tuple[int, ...]] | None = None,
    config: str = "config.json",
) -> dict[str, Tensor]:
    """Read a module's weights: ``model.safetensors``, or ``pytorch_model.bin`` only if ``allow_pickle``.

    ``expected``: the tensors and shapes ``config`` implies, checked against the file (a safetensors file's
    header, before anything is loaded); a missing, extra or differently shaped tensor is refused naming both."""
    safe = folder / "model.safetensors"
    if safe.is_file():
        from safetensors.torch import load_file

        _check_shapes(safe, check_safetensors(safe), expected, config)
        state = load_file(str(safe))
        check_finite_tensors(state.items(), safe)
        return state
    pickled = folder / "pytorch_model.bin"
    if pickled.is_file():
        refuse_pickle(folder, allow_pickle)
        state = load_pickled(pickled)
        _check_shapes(pickled, {k: tuple(v.shape) for k, v in state.items()}, expected, config)
        check_finite_tensors(state.items(), pickled)
        return state
    raise ModelFormatError(f"{folder}: no weights found (expected model.safetensors)")


def _check_shapes(
    file: Path, shapes: Mapping[str, tuple[int, ...]], expected: Mapping[str, tuple[int, ...]] | None, config: str
) -> None:
    if expected is None:
        return
    for name, shape in expected.items():
        if name not in shapes:
            raise ModelFormatError(f"{file}: no tensor {name!r}, which {config} implies (shape {list(shape)})")
        if tuple(shapes[name]) != tuple(shape):
            raise ModelFormatError(
                f"{file}: tensor {name!r} has shape {list(shapes[name])}, but {config} implies {list(shape)}; "
                "the config does not match the weights"
            )
    extra = sorted(set(shapes) - set(expected))
    if extra:
        raise ModelFormatError(f"{file}: holds tensor {extra[0]!r}, which {config} does not describe")


def save_weights(module: nn.Module, folder: Path) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
