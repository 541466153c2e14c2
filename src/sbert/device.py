"""The device a model runs on when none is named: the GPU where torch sees one, else the CPU."""

from __future__ import annotations


def default_device() -> str:
    """``"cuda"`` if torch can use a GPU, else ``"cpu"``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
