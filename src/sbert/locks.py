"""A folder's writers' lock: an exclusive ``flock`` on a file in it that holds the holder's process id.

Used by the vector index (``search/index/store.py``) and the shard folders of ``sbert.parallel``. The kernel drops
the lock when its holder exits, however it exits (SIGKILL included), so a killed writer never leaves a
folder locked; the process id in the file only names the holder in messages.

The lock file is opened without following links and must be a plain file with no other name (not a link,
a folder, a device or a hard link): a planted ``.lock`` can never make a writer truncate another file.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sbert.errors import SbertError

_log = logging.getLogger(__name__)
_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def check_lock_file(file: Path, unsafe: Callable[[str], Exception] = SbertError) -> None:
    """Raise ``unsafe(message)`` if ``file`` exists and is not a plain lock file (call before long work)."""
    try:
        info = os.lstat(file)
    except FileNotFoundError:
        return
    except OSError as err:
        raise unsafe(f"{file}: cannot be checked ({err.strerror}); the folder's lock must be a plain file") from err
    problem = _problem(info)
    if problem:
        raise unsafe(_unsafe_message(file, problem))


def _problem(info: os.stat_result) -> str | None:
    """What makes a file unfit as a lock (None if nothing)."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISREG(info.st_mode):
        return "is not a plain file"
    if info.st_nlink > 1:
        return f"is a hard link (the file has {info.st_nlink} names)"
    return None


def _unsafe_message(file: Path, problem: str) -> str:
    return (
        f"{file}: {problem}, not a lock file sbert wrote; refusing to write through it: remove it, or write into "
        "another folder"
    )


def _open_lock(file: Path, unsafe: Callable[[str], Exception]) -> int:
    """A read-write descriptor of the lock ``file``, created in its folder if missing, never through a link."""
    try:
        fd = os.open(file, _FLAGS | os.O_CREAT, 0o666)
    except OSError as err:
        info = None
        with contextlib.suppress(OSError):
            info = os.lstat(file)
        problem = _problem(info) if info is not None else None
        if problem:
            raise unsafe(_unsafe_message(file, problem)) from err
        raise unsafe(f"{file}: cannot be opened as the folder's lock ({err.strerror})") from err
    problem = _problem(os.fstat(fd))
    if problem:
        os.close(fd)
        raise unsafe(_unsafe_message(file, problem))
    return fd


@contextlib.contextmanager
def hold_lock(
    file: Path,
    timeout: float,
    refuse: Callable[[str], Exception],
    log: logging.Logger = _log,
    unsafe: Callable[[str], Exception] = SbertError,
) -> Iterator[None]:
    """Hold the exclusive lock on ``file`` (created if need be), waiting up to ``timeout`` seconds for another
    holder to let go; then raise ``refuse(holder)``, ``holder`` naming it ("process 1234"). A ``file`` that is
    a link or not a plain file raises ``unsafe(message)`` before anything is written."""
    fd = _open_lock(file, unsafe)
    try:
        _acquire(fd, file, timeout, refuse, log)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, file: Path, timeout: float, refuse: Callable[[str], Exception], log: logging.Logger) -> None:
    """Take the exclusive lock on ``file`` (open as ``fd``), waiting up to ``timeout`` seconds for its holder."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    holder = _holder(fd)
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
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise refuse(holder) from None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.5)


def _holder(fd: int) -> str:
    """Who holds (or last held) the lock open as ``fd``: "process 1234", or "another process"."""
    with contextlib.suppress(OSError, ValueError, IndexError, UnicodeDecodeError):
        return f"process {int(os.pread(fd, 32, 0).decode('ascii').split()[0])}"
    return "another process"
