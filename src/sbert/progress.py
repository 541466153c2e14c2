"""When a progress bar shows: the one policy for ``show_progress`` across encode, predict, evaluation and training."""

from __future__ import annotations

from typing import Any

ENCODE_FROM = 5_000  # encode and predict: with show_progress=None, a bar from this many items (on a terminal)


def progress_bar(
    total: int, desc: str, show_progress: bool | None = None, unit: str = "it", *, from_items: int = 0, initial: int = 0
) -> Any:
    """A tqdm bar over ``total`` items: shown if ``show_progress`` is True, hidden if False, and with None
    shown when standard error is a terminal and ``total`` is at least ``from_items``."""
    from tqdm.auto import tqdm

    disable = (None if total >= from_items else True) if show_progress is None else not show_progress
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, disable=disable, dynamic_ncols=True)
