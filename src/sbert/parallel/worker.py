"""What runs inside each worker process: load the model once, then encode chunks into shard files."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from sbert.parallel.inputs import Chunk
from sbert.parallel.shards import write_shard_files

if TYPE_CHECKING:
    from sbert.encoder import Encoder

# Tests only: a worker process that is about to write this shard (its index) kills itself with SIGKILL.
KILL_AT_SHARD_ENV = "SBERT_PARALLEL_KILL_AT_SHARD"


@dataclass(frozen=True)
class EncodeSpec:
    """How to load the model and encode (picklable: sent once to each worker process)."""

    model: str
    backend: str = "torch"
    precision: str = "fp32"
    device: str | None = None
    allow_pickle: bool = False
    max_seq_length: int | None = None
    batch_size: int = 32
    max_tokens: int | None = None
    normalize: bool = False
    prompt_name: str | None = None
    prompt: str | None = None

    def load(self) -> Any:
        """The encoder this spec names (loaded from local files only)."""
        import sbert

        encoder = sbert.load(
            self.model,
            device=self.device,
            allow_pickle=self.allow_pickle,
            backend=cast(Literal["torch", "onnx"], self.backend),  # a name of BACKENDS, checked by the CLI
            precision=self.precision,
        )
        if self.max_seq_length:
            encoder.max_seq_length = self.max_seq_length
        return encoder

    def encode(self, encoder: Encoder, folder: Path, chunk: Chunk) -> dict[str, Any]:
        """Encode ``chunk`` and write its shard files into ``folder``; returns the shard's record."""
        vectors = encoder.encode(
            chunk.texts,
            batch_size=self.batch_size,
            max_tokens=self.max_tokens,
            normalize=self.normalize,
            prompt_name=self.prompt_name,
            prompt=self.prompt,
            show_progress=False,
        )
        return write_shard_files(folder, chunk.index, chunk.start, chunk.texts, vectors, chunk.ids)


_state: dict[str, Any] = {}


def init_worker(spec: EncodeSpec, threads: int, parent: int) -> None:
    """Process-pool initializer: die with the ``parent`` process, leave SIGINT (Ctrl-C in the terminal) to it,
    use ``threads`` intra-op threads (torch and ONNX Runtime), then load the model."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    _state["spec"], _state["encoder"] = spec, spec.load()


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` dies, however it dies (SIGKILL included): on Linux the kernel sends
    SIGKILL at once (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon thread checks once a second that the
    parent is still this process's parent. A parent already gone ends it now."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="watch-parent", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def run_chunk(folder: str, chunk: Chunk) -> dict[str, Any]:
    """Encode one chunk with this worker's model (see ``init_worker``)."""
    if os.environ.get(KILL_AT_SHARD_ENV) == str(chunk.index):
        os.kill(os.getpid(), signal.SIGKILL)
    return _state["spec"].encode(_state["encoder"], Path(folder), chunk)
