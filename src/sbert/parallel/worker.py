"""What runs inside each worker process: load the model once, then encode chunks into shard files."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbert.parallel.inputs import Chunk
from sbert.parallel.shards import write_shard_files

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
            backend=self.backend,
            precision=self.precision,
        )
        if self.max_seq_length:
            encoder.max_seq_length = self.max_seq_length
        return encoder

    def encode(self, encoder: Any, folder: Path, chunk: Chunk) -> dict[str, Any]:
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
        return write_shard_files(folder, chunk.index, chunk.start, chunk.texts, vectors)


_state: dict[str, Any] = {}


def init_worker(spec: EncodeSpec, threads: int) -> None:
    """Process-pool initializer: ``threads`` intra-op threads (torch and ONNX Runtime), then the model."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    _state["spec"], _state["encoder"] = spec, spec.load()


def run_chunk(folder: str, chunk: Chunk) -> dict[str, Any]:
    """Encode one chunk with this worker's model (see ``init_worker``)."""
    if os.environ.get(KILL_AT_SHARD_ENV) == str(chunk.index):
        os.kill(os.getpid(), signal.SIGKILL)
    return _state["spec"].encode(_state["encoder"], Path(folder), chunk)
