"""Atomic writes: build a file or folder under a temporary name beside the target, then rename it."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``target``; on success it replaces ``target``.

    On error the temporary folder is removed and ``target`` is left as it was.
    """
    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp = target.parent / f".{target.name}.tmp-{tag}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if target.exists():
        if not target.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
            raise FileExistsError(f"{target} exists and is not a folder; refusing to replace it")
        old = target.parent / f".{target.name}.old-{tag}"
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike[str], mode: str = "wb", **open_kwargs) -> Iterator[IO]:
    """Open a temporary file beside ``target`` for writing; on success rename it onto ``target``."""
    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
