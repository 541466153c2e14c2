"""Child processes that end with the benchmark that started them, however it ends."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def ends_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when this process dies (killed
    included; Linux only, None elsewhere). SIGINT lets an ``sbert`` command stop as on Ctrl-C (a training run
    saves its checkpoint)."""
    if not sys.platform.startswith("linux"):
        return None

    def arm() -> None:
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)

    return arm
