"""The service's settings and their defaults, in one place (``sbert serve``'s options default to these).

Plain dataclasses without heavy imports, so that the command line can read the defaults before it
loads torch or the model.
"""

from __future__ import annotations

from dataclasses import dataclass

TORCH_WORKERS = 2  # merged batches run side by side on the torch backend (ONNX Runtime threads itself: 1)


@dataclass(frozen=True)
class Limits:
    """Request limits: inputs per request, characters per input, request body bytes."""

    max_inputs: int = 2048
    max_chars: int = 100_000
    max_body_bytes: int = 16 * 2**20


@dataclass(frozen=True)
class EngineSettings:
    """How the embedding engine merges and runs requests' texts.

    A merged batch holds up to ``max_batch_texts`` texts, collected for at most ``max_wait_ms`` after
    the first. ``packing`` (None: wherever the encoder can pack) runs it unpadded in forward passes of
    up to ``max_tokens`` real tokens; without it, in sorted batches of ``encode_batch_size`` texts and
    ``max_tokens`` padded slots. ``workers`` batches run side by side (None: ``TORCH_WORKERS`` on the
    torch backend, 1 on ONNX), torch's threads divided among them.
    """

    max_batch_texts: int = 256
    max_wait_ms: float = 5.0
    encode_batch_size: int = 32
    max_tokens: int | None = None
    packing: bool | None = None
    workers: int | None = None

    def workers_for(self, on_torch: bool) -> int:
        """The number of batch workers: the one asked for, else the backend's default."""
        return self.workers or (TORCH_WORKERS if on_torch else 1)
