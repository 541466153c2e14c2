"""What a LoRA adapter folder is, without torch: PEFT's file names, the test for one, and the record an index
keeps of it and the check of a model against that record (``sbert.adapters`` trains, loads and merges them)."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"  # PEFT's names, which sentence-transformers and transformers read too
ADAPTER_WEIGHTS = "adapter_model.safetensors"
DEFAULT_MAX_ADAPTERS = 16  # adapters one process holds over a base: bounds memory (a few MB each) and start-up time


def is_adapter_folder(path: Path) -> bool:
    """Whether ``path`` holds a PEFT adapter (``adapter_config.json``) rather than a whole model."""
    return (path / ADAPTER_CONFIG).is_file()


def is_peft(model: object) -> bool:
    """Whether a Transformer's model is a PEFT model (an adapter over a base); never imports peft."""
    return type(model).__module__.startswith("peft.")


def adapter_file(folder: str | Path) -> Path | None:
    """The adapter weights of the model folder ``folder`` (its transformer's, where ``modules.json`` puts it
    elsewhere), or None for a whole model."""
    import json

    folder = Path(folder)
    candidates = [folder]
    try:
        entries = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        path = min(entries, key=lambda e: e.get("idx", 0)).get("path", "")
        if isinstance(path, str) and ".." not in Path(path).parts and not Path(path).is_absolute():
            candidates.insert(0, folder / path)
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    for candidate in candidates:
        if is_adapter_folder(candidate) and (candidate / ADAPTER_WEIGHTS).is_file():
            return candidate / ADAPTER_WEIGHTS
    return None


def adapter_record(folder: str | Path) -> dict | None:
    """What an index records of the adapter a model folder carries: the folder's name, the base it names and a
    SHA-256 of its weights file (which decides the vectors, wherever the folder lies); None for a whole model."""
    import json

    weights = adapter_file(folder)
    if weights is None:
        return None
    digest = hashlib.sha256()
    with open(weights, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    try:
        base = json.loads((weights.parent / ADAPTER_CONFIG).read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        base = None
    return {"name": Path(folder).resolve().name, "base": base, "sha256": digest.hexdigest()}


def check_adapter(path: str | Path, recorded: dict | None, name_or_path: str | Path) -> None:
    """Raise IndexMismatchError unless ``name_or_path`` carries the LoRA adapter the index recorded (the same
    weights, wherever the folder now lies). An index that records none (built with a whole model, by an older
    sbert, or in a database that keeps no record of it) leaves the check to the model's name."""
    from sbert.errors import IndexMismatchError
    from sbert.model_names import resolve

    if recorded is None:
        return
    given = None
    with contextlib.suppress(Exception):
        given = adapter_record(resolve(name_or_path))
    if given and recorded.get("sha256") == given["sha256"]:
        return
    built = f"adapter {recorded.get('name')!r} over {recorded.get('base')}"
    now = f"adapter {given['name']!r} over {given['base']}" if given else "no adapter"
    changed = " (its weights changed since)" if given and recorded.get("name") == given["name"] else ""
    raise IndexMismatchError(
        f"index {path} was built with {built}; refusing to use it with {str(name_or_path)!r}, which carries "
        f"{now}{changed}: embeddings of different adapters are not comparable"
    )
