"""Deadlines on reading a request, which uvicorn lacks: it closes idle keep-alive connections, but a
client that sends half a request line (or half a body) and then nothing holds its connection forever.

``guarded_protocol(connections)`` is uvicorn's httptools protocol (``uvicorn[standard]`` installs it)
with two timers: a request's headers must be complete within ``header_timeout`` seconds of its first
byte (of the connection, for the first request: a client that sends nothing is closed too), and its
body may pause at most ``read_timeout`` seconds between chunks. A client too slow gets ``408`` and the
connection is closed. ``make_server`` passes it to uvicorn with ``limit_concurrency`` and
``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from sbert.serve.settings import Connections

log = logging.getLogger("uvicorn.error")
TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n"
)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a body read timeout (``settings.Connections``)."""

    guard: Connections = Connections()  # (uvicorn keeps its set of open connections in .connections)
    _timer: asyncio.TimerHandle | None = None
    _waiting_for: str = "headers"

    def _arm(self, seconds: float, waiting_for: str) -> None:
        self._disarm()
        self._waiting_for = waiting_for
        self._timer = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.transport is None or self.transport.is_closing():
            return
        if self._waiting_for == "body" and self.flow is not None and self.flow.read_paused:
            self._arm(self.guard.read_timeout, "body")  # the server paused reading, not the client
            return
        limit = self.guard.header_timeout if self._waiting_for == "headers" else self.guard.read_timeout
        setting = "--header-timeout" if self._waiting_for == "headers" else "--read-timeout"
        message = (
            f'{{"error": {{"message": "the request\'s {self._waiting_for} did not arrive within {limit:g} s '
            f'({setting})", "type": "invalid_request_error", "param": null, "code": "request_timeout"}}}}'
        ).encode()
        log.info("closing a connection from %s: its request's %s took over %g s", self.client, self._waiting_for, limit)
        self.transport.write(TIMED_OUT % len(message) + message)
        self.transport.close()

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.guard.header_timeout, "headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(self.guard.header_timeout, "headers")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.guard.read_timeout, "body")

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._arm(self.guard.read_timeout, "body")

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()


def guarded_protocol(connections: Connections) -> type[GuardedProtocol]:
    """``GuardedProtocol`` with these time-outs, for ``uvicorn.Config(http=...)``."""
    return type("GuardedProtocol", (GuardedProtocol,), {"guard": connections})
