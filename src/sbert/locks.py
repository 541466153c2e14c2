"""A folder's writers' lock: an exclusive ``flock`` on a file in it that holds the holder's process id.

Used by the vector index (``search/store.py``) and the shard folders of ``sbert.parallel``. The kernel drops
the lock when its holder exits, however it exits (SIGKILL included), so a killed writer never leaves a
folder locked; the process id in the file only names the holder in messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

_log = logging.getLogger(__name__)


@contextlib.contextmanager
def hold_lock(
    file: Path, timeout: float, refuse: Callable[[str], Exception], log: logging.Logger = _log
) -> Iterator[None]:
    """Hold the exclusive lock on ``file`` (created if need be), waiting up to ``timeout`` seconds for another
    holder to let go; then raise ``refuse(holder)``, ``holder`` naming it ("process 1234")."""
    with open(file, "a+", encoding="utf-8") as lock:
        _acquire(lock, file, timeout, refuse, log)
        try:
            lock.seek(0)
            lock.truncate()
            lock.write(f"{os.getpid()}\n")
            lock.flush()
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _acquire(
    lock: IO[str], file: Path, timeout: float, refuse: Callable[[str], Exception], log: logging.Logger
) -> None:
    """Take the exclusive lock on ``file``, waiting up to ``timeout`` seconds for its holder to finish."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    holder = lock_holder(file)
    if timeout > 0:
        log.warning(
            "%s: another writer (%s) holds the lock %s; waiting up to %g s for it to finish",
            file.parent,
            holder,
            file,
            timeout,
        )
    deadline, delay = time.monotonic() + timeout, 0.02
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise refuse(holder) from None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.5)


def lock_holder(file: Path) -> str:
    """Who holds (or last held) the lock ``file``: "process 1234", or "another process" if it does not say."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return f"process {int(file.read_text(encoding='utf-8').split()[0])}"
    return "another process"
