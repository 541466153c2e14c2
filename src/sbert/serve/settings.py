"""The service's settings and their defaults, in one place (``sbert serve``'s options default to these).

Plain dataclasses without heavy imports, so that the command line can read the defaults before it
loads torch or the model.
"""

from __future__ import annotations

from dataclasses import dataclass

TORCH_WORKERS = 2  # merged batches run side by side on the torch backend (ONNX Runtime threads itself: 1)
FIELD_VALUES = 64  # JSON values a body may hold besides its texts: the request's other fields, with room


@dataclass(frozen=True)
class Limits:
    """Request limits: inputs per request, characters per input, request body bytes, and what one request
    may ask back: ``max_search_hits`` (/search's queries × ``k``, × ``candidates`` when it re-ranks or fuses),
    ``max_similarity_cells`` (/similarity's scores: ``len(a) × len(b)``, ``len(a)`` pairwise) and
    ``max_response_bytes`` (a /search answer, its hits' texts included).

    A body is also counted before it is parsed: it may hold at most ``max_body_values`` JSON values (twice
    ``max_inputs``, as /similarity's ``a`` and ``b`` hold, and ``FIELD_VALUES`` for the other fields), so
    that a body of millions of tiny arrays or strings is refused without building them."""

    max_inputs: int = 2048
    max_chars: int = 100_000
    max_body_bytes: int = 16 * 2**20
    max_search_hits: int = 100_000
    max_similarity_cells: int = 1_000_000
    max_response_bytes: int = 64 * 2**20

    @property
    def max_body_values(self) -> int:
        """The most JSON values (strings, numbers, arrays, objects, nested or not) a request body may hold."""
        return 2 * self.max_inputs + FIELD_VALUES


@dataclass(frozen=True)
class Connections:
    """How long a client may take and how many may connect (``sbert serve`` hands them to uvicorn).

    A request's headers must arrive within ``header_timeout`` seconds of its first byte (of the
    connection, for its first request) and hold at most ``max_header_bytes`` (request line included;
    else 431); its body may pause at most ``read_timeout`` seconds between chunks and must arrive whole
    within ``body_timeout`` seconds of its headers (else 408; a client dripping a byte now and then
    holds its connection no longer than that). An idle keep-alive connection closes after
    ``keep_alive`` seconds. Past ``max_connections`` open connections (or requests in flight),
    requests are answered 503.
    """

    header_timeout: float = 10.0
    read_timeout: float = 30.0
    keep_alive: float = 5.0
    max_connections: int = 512
    body_timeout: float = 60.0  # a whole body of --max-body-mb (16 MiB) in a minute: about 2 Mbit/s
    max_header_bytes: int = 64 * 2**10  # browsers send a few KiB; room for long bearer tokens and cookies


@dataclass(frozen=True)
class Access:
    """Which requests may reach the service at all (against DNS rebinding and other web pages).

    ``host``: the address the service is bound to. The ``Host`` header must name it (bound to a loopback
    address: ``localhost`` or any loopback address; bound to every address, ``0.0.0.0`` or ``::``:
    ``localhost`` or any IP address) or one of ``allowed_hosts`` (``*``: any). A request with an ``Origin``
    other than the service's own is refused unless ``cors_origins`` lists it (``*``: any), and then
    answered with CORS headers.
    """

    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()


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
