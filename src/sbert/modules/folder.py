"""Checks on a model folder before and after its files are read: each failure names the file at fault.

- No code is ever run: a folder whose configs name custom code (``auto_map``) is refused up front,
  before transformers could import it or ask "Do you wish to run the custom code?".
- No file outside the folder is read: module paths in ``modules.json`` must stay inside it, and a
  symbolic link must point inside it (or, in Hugging Face's hub cache layout, into its ``blobs``).
- Weights are whole and finite: a ``.safetensors`` file must be as long as its header says, each tensor's
  bytes as many as its shape and type need, and a loaded module whose weights hold NaN or infinity is refused.
- Sizes a config names are checked before anything that large is made: against the shapes of the weights
  present (read from the safetensors header, without loading) and against ``MAX_WIDTH``.
- Pickled weights (``pytorch_model.bin``, which can run code when loaded) are read only with
  ``allow_pickle``: ``weight_files`` and ``refuse_pickle`` are the one place that decides, and even then only
  as tensors (``load_pickled``).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import torch
from torch import nn

from sbert.errors import ModelFormatError

# Configs in which transformers looks for ``auto_map`` (custom classes imported from the folder).
CODE_CONFIGS = (
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "feature_extractor_config.json",
)
_MAX_HEADER = 100 * 2**20  # a safetensors header larger than this is damage, not a model
SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
MAX_WIDTH = 1 << 16  # the widest vector a module config may name: far above any model's, far below a memory error
# Bytes per element of the safetensors dtypes (a dtype not listed here is left to safetensors to check).
_DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json")


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object, with an error that names the file and what is wrong."""
    if not path.is_file():
        raise ModelFormatError(f"{path}: file not found (expected a JSON config here)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ModelFormatError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise ModelFormatError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def refuse_remote_code(folder: Path) -> None:
    """Raise ``ModelFormatError`` naming ``folder`` if any of its configs names code to import."""
    for name in CODE_CONFIGS:
        config_file = folder / name
        if not config_file.is_file():
            continue
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # the loader that reads it reports malformed JSON with its own message
        auto_map = config.get("auto_map") if isinstance(config, dict) else None
        if auto_map:
            raise ModelFormatError(
                f"{folder}: {name} names custom code to run (auto_map: {json.dumps(auto_map)[:200]}); sbert never "
                "runs code from a model folder (trust_remote_code is always off). Use a model whose architecture "
                "transformers ships, or remove auto_map if the built-in class is the right one"
            )


def _roots(folder: Path) -> list[Path]:
    """Where the folder's files may lead: the folder, and in a hub cache snapshot the repo's blobs."""
    root = folder.resolve()
    roots = [root]
    # ~/.cache/huggingface/hub/models--org--name/snapshots/<revision>/<file> -> ../../blobs/<hash>
    if root.parent.name == "snapshots" and root.parent.parent.name.startswith("models--"):
        roots.append(root.parent.parent / "blobs")
    return roots


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def check_links(folder: Path) -> None:
    """Refuse symbolic links in ``folder`` (at any depth) that lead outside it."""
    roots = _roots(folder)
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            entry = Path(dirpath) / name
            if entry.is_symlink() and not _inside(entry.resolve(), roots):
                raise ModelFormatError(
                    f"{entry}: a symbolic link to {os.readlink(entry)}, outside the model folder {folder}; "
                    "sbert reads only files inside the model folder (copy the file in instead of linking it)"
                )


def module_folder(root: Path, relative: object, source: Path) -> Path:
    """``root / relative`` for a module path read from ``source``, refused if it leaves ``root``."""
    if not isinstance(relative, str):
        raise ModelFormatError(f"{source}: module path {relative!r} is not a string")
    if any(ord(c) < 32 for c in relative):
        raise ModelFormatError(
            f"{source}: module 'path' {relative!r} holds a control character (a NUL byte or a line break); "
            "expected a folder name such as '1_Pooling'"
        )
    absolute = PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).is_absolute()
    parts = PurePosixPath(relative.replace("\\", "/")).parts
    if absolute or ".." in parts or relative.startswith("~"):
        raise ModelFormatError(
            f"{source}: module path {relative!r} leaves the model folder; expected a folder inside {root} "
            "such as '1_Pooling'"
        )
    folder = root / relative
    if not _inside(folder.resolve(), _roots(root)):
        raise ModelFormatError(f"{source}: module path {relative!r} leads to {folder.resolve()}, outside {root}")
    return folder


def check_safetensors(path: Path) -> dict[str, tuple[int, ...]]:
    """Raise naming ``path`` if it is empty, truncated or not a safetensors file (header, each tensor's bytes
    against its shape and type, and the length); returns each tensor's shape, read without loading any."""
    size = path.stat().st_size
    damaged = f"{path}: damaged weights file ({size:,} bytes)"
    if size < 8:
        raise ModelFormatError(f"{damaged}: empty or truncated; copy or download the model again")
    with open(path, "rb") as handle:
        header_size = int.from_bytes(handle.read(8), "little")
        if header_size > min(size - 8, _MAX_HEADER):
            raise ModelFormatError(f"{damaged}: truncated or not a safetensors file (header of {header_size:,} bytes)")
        try:
            header = json.loads(handle.read(header_size))
            tensors = {k: t for k, t in header.items() if k != "__metadata__"}
        except (ValueError, AttributeError) as err:
            raise ModelFormatError(f"{damaged}: unreadable safetensors header ({err})") from None
    shapes, spans = {}, []
    for name, tensor in tensors.items():
        shapes[name], begin, end = _tensor_entry(damaged, name, tensor)
        spans.append((begin, end, name))
    end = 0
    for begin, stop, name in sorted(spans):
        if begin != end:
            raise ModelFormatError(
                f"{damaged}: tensor {name!r} starts at byte {begin:,} of the data, where {end:,} was expected "
                "(tensors must follow each other without gaps or overlaps); copy or download the model again"
            )
        end = stop
    expected = 8 + header_size + end
    if expected != size:
        raise ModelFormatError(
            f"{damaged}: its header describes {expected:,} bytes, so the file is "
            f"{'truncated' if size < expected else 'damaged'}; copy or download the model again"
        )
    return shapes


def _tensor_entry(damaged: str, name: str, tensor: Any) -> tuple[tuple[int, ...], int, int]:
    """The shape and byte span of one safetensors header entry, checked against each other."""
    ok = isinstance(tensor, dict)
    shape, offsets = (tensor.get("shape"), tensor.get("data_offsets")) if ok else (None, None)
    if not (isinstance(shape, list) and all(map(_whole, shape))):
        raise ModelFormatError(f"{damaged}: tensor {name!r} has no valid 'shape' in the header ({shape!r})")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_whole, offsets)) and offsets[0] <= offsets[1]):
        raise ModelFormatError(f"{damaged}: tensor {name!r} has no valid 'data_offsets' in the header ({offsets!r})")
    width = _DTYPE_BYTES.get(tensor.get("dtype"))
    if width is not None and math.prod(shape) * width != offsets[1] - offsets[0]:
        raise ModelFormatError(
            f"{damaged}: tensor {name!r} of shape {shape} and dtype {tensor['dtype']} needs "
            f"{math.prod(shape) * width:,} bytes, but its data_offsets span {offsets[1] - offsets[0]:,}; "
            "copy or download the model again"
        )
    return tuple(shape), offsets[0], offsets[1]


def _whole(value: Any) -> bool:
    return type(value) is int and value >= 0


def load_pickled(file: Path) -> dict[str, torch.Tensor]:
    """The tensors of a pickled weights file (read only with ``allow_pickle``), loaded as tensors only:
    a file that holds other Python objects (which could run code) is refused naming it."""
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise ModelFormatError(pickle_refusal(file, err)) from None
    except (RuntimeError, EOFError, ValueError) as err:
        raise ModelFormatError(f"{file}: damaged weights file ({str(err).splitlines()[0]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelFormatError(f"{file}: expected a dictionary of named tensors, found {type(state).__name__}")
    return state


def pickle_refusal(file: Path, err: Exception) -> str:
    """The one-line refusal of a pickled file that holds more than tensors, naming what it holds."""
    named = re.search(r"GLOBAL (\S+)", str(err))
    what = f" (it names {named.group(1)})" if named else ""
    return (
        f"{file}: refused: it holds Python objects other than tensors{what}, which could run code when "
        "loaded; sbert reads pickled weights as tensors only"
    )


def check_width(value: Any, file: Path, field: str) -> int:
    """``value`` of ``field`` in ``file``: a vector width (a whole number from 1 to ``MAX_WIDTH``), else
    ``ModelFormatError`` naming both."""
    if type(value) is not int or not 1 <= value <= MAX_WIDTH:
        raise ModelFormatError(
            f"{file}: {field!r} must be a whole number from 1 to {MAX_WIDTH:,} (a vector width), got {value!r}"
        )
    return value


def check_finite(module: nn.Module, source: Path) -> None:
    """Refuse a loaded module whose weights hold NaN or infinity, naming ``source`` and the tensor.

    Checked once at load rather than on every ``encode``: one pass over the weights (milliseconds
    for MiniLM) names the file and the tensor at fault, whereas NaN vectors found in ``encode``
    would cost a check per batch and could only point at texts that are not to blame.
    """
    check_finite_tensors(module.named_parameters(), source)


def check_finite_tensors(named: Iterable[tuple[str, torch.Tensor]], source: Path) -> None:
    """``check_finite`` for (name, tensor) pairs, such as a state dict's items."""
    for name, weight in named:
        if isinstance(weight, torch.Tensor) and weight.is_floating_point() and not bool(torch.isfinite(weight).all()):
            bad = int((~torch.isfinite(weight)).sum())
            raise ModelFormatError(
                f"{source}: weight {name!r} holds {bad:,} NaN or infinite values (of {weight.numel():,}); "
                "such a model gives NaN vectors (was its training diverging?)"
            )


def refuse_pickle(folder: Path, allow_pickle: bool) -> None:
    """Raise naming ``folder`` unless ``allow_pickle``: its weights are only in pickle form."""
    if not allow_pickle:
        raise ModelFormatError(
            f"{folder}: weights are only in pickle form (pytorch_model.bin), which can run code when "
            "loaded; pass allow_pickle=True if you trust this folder"
        )


def safetensors_files(folder: Path) -> list[Path]:
    """The weight files of a Hugging Face folder: ``model.safetensors``, or the shards its index names."""
    single = folder / SAFE_WEIGHTS[0]
    if single.is_file():
        return [single]
    index = folder / SAFE_WEIGHTS[1]
    weight_map = read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelFormatError(f"{index}: expected a 'weight_map' naming the weight shards")
    shards = []
    for name in sorted(set(map(str, weight_map.values()))):
        shard = folder / name
        if Path(name).is_absolute() or ".." in Path(name).parts or not shard.is_file():
            raise ModelFormatError(f"{index}: shard {name!r} is not a file inside {folder}")
        shards.append(shard)
    return shards


def weight_files(folder: Path, allow_pickle: bool, what: str = "weights") -> tuple[list[Path], bool]:
    """The weight files of a Hugging Face folder, checked, and whether they are safetensors.

    safetensors (one file or index shards, each checked whole) come first; ``pytorch_model.bin``
    only with ``allow_pickle``. Raises naming ``folder`` where there are no ``what`` at all.
    """
    if any((folder / name).is_file() for name in SAFE_WEIGHTS):
        files = safetensors_files(folder)
        for file in files:
            check_safetensors(file)
        return files, True
    pickled = [folder / name for name in PICKLE_WEIGHTS if (folder / name).is_file()]
    if not pickled:
        raise ModelFormatError(f"{folder}: no {what} (expected model.safetensors)")
    refuse_pickle(folder, allow_pickle)
    return pickled[:1], False


def check_widths(modules: Sequence[nn.Module], folders: Sequence[Path]) -> None:
    """Refuse a chain of modules (read from ``folders``) where one expects vectors of another width than the
    module before it gives: a Pooling's ``word_embedding_dimension``, a Dense layer's ``in_features``."""
    width, before = getattr(modules[0], "dim", None), modules[0]
    for module, folder in zip(modules[1:], folders[1:], strict=True):
        expected = getattr(module, "input_dim", None)
        if expected is not None and width is not None and expected != width:
            raise ModelFormatError(
                f"{folder / 'config.json'}: {module.input_field!r} is {expected}, but the module before it "
                f"({type(before).__name__}) gives vectors {width} wide; the config does not match the model"
            )
        width, before = getattr(module, "dim", width), module
