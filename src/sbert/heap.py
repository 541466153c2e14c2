"""Training on a CPU with glibc's allocator: keep the heap from growing on freed-but-unusable holes.

A training step allocates activations of many sizes and frees them in another order. glibc serves every block
below its mmap threshold from one heap, and by default raises that threshold as large blocks are freed (up to
32 MiB), so tensors of a few MiB end up in the heap; the holes they leave are too small or too scattered for the
next step's tensors, and the heap grows. A LoRA adapter, whose low-rank branch adds temporaries beside each
adapted layer, suffers most. With the threshold fixed at 1 MiB, blocks of 1 MiB and more are mapped for
themselves and given back whole when freed: the peak follows what the step really holds, at the cost of mapping
fresh pages for each large tensor (benchmarks/adapters.py measures both).

``steady_heap`` sets the threshold for the ``with`` block and afterwards leaves glibc's largest dynamic value
in place (what a long process reaches anyway). It does nothing off glibc, and nothing when the user has set the
allocator through the environment (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TOP_PAD_``, ``GLIBC_TUNABLES``...):
their setting wins.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Iterator

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
TRAINING_THRESHOLD = 1 << 20  # blocks from 1 MiB up are mapped for themselves while training
AFTER_TRAINING = 32 << 20  # glibc's largest dynamic threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)


def _mallopt():
    """glibc's ``mallopt``, or None (another C library, or none found)."""
    name = ctypes.util.find_library("c")
    if not name or "libc.so" not in name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
    except (OSError, AttributeError):
        return None
    return libc.mallopt


def user_set_allocator(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether the environment already tells glibc's allocator how to behave."""
    return any(key.startswith("MALLOC_") or key == "GLIBC_TUNABLES" for key in environ)


@contextlib.contextmanager
def steady_heap(enabled: bool = True) -> Iterator[bool]:
    """Fix glibc's mmap threshold at 1 MiB inside the block; yields whether it did."""
    mallopt = _mallopt() if enabled and not user_set_allocator() else None
    if mallopt is None or not mallopt(M_MMAP_THRESHOLD, TRAINING_THRESHOLD):
        yield False
        return
    try:
        yield True
    finally:
        mallopt(M_MMAP_THRESHOLD, AFTER_TRAINING)
