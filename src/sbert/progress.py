"""When a progress bar shows: the one policy for ``show_progress`` across encode, predict, evaluation and training."""

from __future__ import annotations

from typing import Any

ENCODE_FROM = 5_000  # encode and predict: with show_progress=None, a bar from this many items (on a terminal)


class HiddenBar:
    """What ``progress_bar`` gives when nothing is shown: counts like a tqdm bar and draws nothing. Cheaper
    than a disabled tqdm (~20 us a call), which one-sentence encodes pay on every call."""

    def __init__(self, total: int, initial: int = 0) -> None:
        self.total, self.n, self.disable = total, initial, True

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, *_: Any, **__: Any) -> None:
        """Nothing to draw."""

    def set_description_str(self, *_: Any, **__: Any) -> None:
        """Nothing to draw."""

    def close(self) -> None:
        """Nothing to close."""

    def __enter__(self) -> HiddenBar:
        return self

    def __exit__(self, *_: object) -> None:
        """Nothing to close."""


def progress_bar(
    total: int, desc: str, show_progress: bool | None = None, unit: str = "it", *, from_items: int = 0, initial: int = 0
) -> Any:
    """A tqdm bar over ``total`` items: shown if ``show_progress`` is True, hidden if False, and with None
    shown when standard error is a terminal and ``total`` is at least ``from_items`` (a ``HiddenBar`` when
    it cannot show)."""
    if show_progress is False or (show_progress is None and total < from_items):
        return HiddenBar(total, initial)
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit=unit,
        disable=None if show_progress is None else False,
        dynamic_ncols=True,
    )
