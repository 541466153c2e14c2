"""Training checkpoints: one file, written atomically, read back without running pickled code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from sbert.atomic import atomic_file
from sbert.errors import SbertError

FILE = "checkpoint.pt"


def save_checkpoint(run_dir: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (tensors, numbers, strings, lists, dicts) to ``run_dir/checkpoint.pt``."""
    target = run_dir / FILE
    with atomic_file(target, "wb") as handle:
        torch.save(state, handle)
    return target


def collect_checkpoint_leftovers(run_dir: Path) -> list[Path]:
    """Remove the temporary files that killed checkpoint writes left in ``run_dir``; returns them."""
    from sbert.atomic import collect_leftovers

    return collect_leftovers(Path(run_dir) / FILE)


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The saved state, or None when there is none yet."""
    path = run_dir / FILE
    if not path.is_file():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file: say which
        raise SbertError(f"{path}: cannot read this checkpoint ({err})") from err


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
