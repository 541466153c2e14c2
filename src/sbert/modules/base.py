"""What every encoder module shares: a features dict in and out, and a folder of its own on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from torch import Tensor, nn

from sbert.errors import ModelFormatError
from sbert.modules.folder import check_finite_tensors, check_safetensors, refuse_pickle

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


def load_weights(folder: Path, *, allow_pickle: bool = False) -> dict[str, Tensor]:
    """Read a module's weights: ``model.safetensors``, or ``pytorch_model.bin`` only if ``allow_pickle``."""
    safe = folder / "model.safetensors"
    if safe.is_file():
        from safetensors.torch import load_file

        check_safetensors(safe)
        state = load_file(str(safe))
        check_finite_tensors(state.items(), safe)
        return state
    pickled = folder / "pytorch_model.bin"
    if pickled.is_file():
        refuse_pickle(folder, allow_pickle)
        import torch

        try:
            state = torch.load(pickled, map_location="cpu", weights_only=True)
        except (RuntimeError, EOFError, ValueError) as err:
            raise ModelFormatError(f"{pickled}: damaged weights file ({err})") from None
        check_finite_tensors(state.items(), pickled)
        return state
    raise ModelFormatError(f"{folder}: no weights found (expected model.safetensors)")


def save_weights(module: nn.Module, folder: Path) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
