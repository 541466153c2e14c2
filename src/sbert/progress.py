"""How long runs show their progress: the one policy for ``show_progress`` across encode, predict, evaluation
and training.

- ``show_progress=False``: nothing. ``None``: shown when there are at least ``from_items`` items. ``True``:
  shown.
- On a terminal (or in a notebook) it is a tqdm bar. Elsewhere (standard error sent to a file, ``nohup``, a
  CI job) a bar would be one ever-growing line, so it is plain lines instead (``PlainProgress``): done, total,
  elapsed time and an estimate of the time left, every ``SBERT_PROGRESS_INTERVAL`` seconds (30 by default),
  or sooner where a tenth of the way is done sooner, but never closer than a tenth of that interval; and a
  last line when it ends.
- ``report`` prints a one-line summary of what a run is about to do (what it read, how many steps), before
  its first step, wherever standard error goes.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

ENCODE_FROM = 5_000  # encode and predict: with show_progress=None, a bar from this many items
INTERVAL_ENV = "SBERT_PROGRESS_INTERVAL"  # seconds between two plain progress lines, at the most
INTERVAL_S = 30.0
MARKS = 10  # and a plain line once a tenth of the way more is done
# What the commands' --progress/--no-progress says (each adds its default).
HELP = (
    "Show progress: a bar on a terminal, else a plain line every 30 s ($SBERT_PROGRESS_INTERVAL) or tenth of the "
    "way, with the time left"
)


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


def line_interval() -> float:
    """The most seconds between two plain progress lines: ``$SBERT_PROGRESS_INTERVAL``, else ``INTERVAL_S``."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"${INTERVAL_ENV}={raw!r}: expected a number of seconds above 0 (default {INTERVAL_S:g})")
    return value


def duration(seconds: float) -> str:
    """``seconds`` for a person: 42s, 6m 05s, 1h 02m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


class PlainProgress:
    """A progress bar's interface that writes plain lines to standard error (see the module's docstring).
    ``asked`` (``show_progress=True``): a last line even for a run too short for any other.

    ``stream`` (default: ``sys.stderr`` when a line is written) and ``clock`` are there for tests."""

    disable = False

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str = "it",
        initial: int = 0,
        interval: float | None = None,
        *,
        asked: bool = False,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.n, self.desc, self.unit = total, initial, desc, unit
        self._first_desc = desc
        self.interval = line_interval() if interval is None else interval
        self._stream, self._clock = stream, clock
        self._initial, self._began = initial, clock()
        self._last_time, self._last_n, self._postfix = self._began, initial, ""
        self._next_mark = self._mark_after(initial)
        self._closed, self._asked = False, asked

    def _mark_after(self, n: int) -> float:
        """The count a tenth of ``total`` past ``n``."""
        return n + math.ceil(self.total / MARKS) if self.total > 0 else math.inf

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self._clock()
        since = now - self._last_time
        if since >= self.interval or (self.n >= self._next_mark and since >= self.interval / MARKS):
            self._write(self._progress_line(now))

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **values: Any) -> None:
        """What the next line adds after its figures (a running loss: ``loss=0.1234``)."""
        values = {**(ordered_dict or {}), **values}
        self._postfix = ", ".join(f"{key} {value}" for key, value in values.items())

    def set_description_str(self, desc: str, refresh: bool = True) -> None:
        """A new description (a training's "dev evaluation at step N") is a line of its own; the bar's own
        one, set back, is not."""
        if desc != self.desc and desc != self._first_desc:
            self._emit(desc)
        self.desc = desc

    def _units(self, count: float) -> str:
        return f"{count:,} {self.unit}{'' if count == 1 else 's'}"

    def _rate(self, elapsed: float) -> str:
        done = self.n - self._initial
        if done <= 0 or elapsed <= 0:
            return ""
        per_second = done / elapsed
        if per_second < 1:
            return f"{elapsed / done:,.1f} s/{self.unit}"
        return f"{per_second:,.{0 if per_second >= 100 else 1}f} {self.unit}s/s"

    def _progress_line(self, now: float) -> str:
        elapsed = now - self._began
        share = f" ({self.n / self.total:.0%})" if self.total else ""
        line = f"{self.desc}: {self.n:,}/{self._units(self.total)}{share}, {duration(elapsed)} elapsed"
        done = self.n - self._initial
        if done > 0 and 0 < self.n < self.total:
            left = (self.total - self.n) * elapsed / done
            line += f", about {duration(left)} left"
        rate = self._rate(elapsed)
        line += f" ({rate})" if rate else ""
        return line + (f"; {self._postfix}" if self._postfix else "")

    def _write(self, line: str) -> None:
        """A progress line: the next one is due an interval, or a tenth of the way, after it."""
        self._last_time, self._last_n = self._clock(), self.n
        self._next_mark = self._mark_after(self.n)
        self._emit(line)

    def _emit(self, line: str) -> None:
        stream = self._stream or sys.stderr
        stream.write(line + "\n")
        stream.flush()

    def close(self) -> None:
        """A last line (what was done, in how long) for a run that wrote lines, lasted a tenth of the interval
        or was ``asked`` for; another short run stays silent."""
        if self._closed:
            return
        self._closed = True
        elapsed = self._clock() - self._began
        if self._last_n == self.n and self._last_n != self._initial:
            return  # the last line said it all
        if self._last_n == self._initial and elapsed < self.interval / MARKS and not self._asked:
            return
        rate = self._rate(elapsed)
        line = f"{self.desc}: {self.n:,}/{self._units(self.total)} in {duration(elapsed)}" + (
            f" ({rate})" if rate else ""
        )
        self._write(line + (f"; {self._postfix}" if self._postfix else ""))

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _on_terminal() -> bool:
    """Whether standard error is a terminal."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def _in_notebook() -> bool:
    """Whether tqdm draws notebook widgets here (a Jupyter kernel): its bars are shown as ever."""
    import tqdm.auto  # noqa: F401 (first: it imports tqdm.autonotebook without the warning of a notebook)
    from tqdm import std
    from tqdm.autonotebook import tqdm as chosen

    return chosen is not std.tqdm


def progress_bar(
    total: int, desc: str, show_progress: bool | None = None, unit: str = "it", *, from_items: int = 0, initial: int = 0
) -> Any:
    """A progress bar over ``total`` items: shown if ``show_progress`` is True, hidden if False, and with None
    shown when ``total`` is at least ``from_items`` (a ``HiddenBar`` when it is not shown). Shown, it is a tqdm
    bar on a terminal or in a notebook, else a ``PlainProgress`` writing plain lines."""
    if show_progress is False or (show_progress is None and total < from_items):
        return HiddenBar(total, initial)
    if not _on_terminal() and not _in_notebook():
        return PlainProgress(total, desc, unit, initial, asked=show_progress is True)
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit=unit,
        disable=None if show_progress is None else False,
        dynamic_ncols=True,
    )


def report(line: str, show_progress: bool | None = None) -> None:
    """Write ``line`` (what a run is about to do) to standard error unless ``show_progress`` is False;
    above any bar on a terminal."""
    if show_progress is False:
        return
    if _on_terminal():
        from tqdm.auto import tqdm

        tqdm.write(line, file=sys.stderr)
        return
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
