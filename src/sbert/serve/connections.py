"""Deadlines and bounds on reading a request, which uvicorn lacks: it closes idle keep-alive connections, but
a client that sends half a request line (or half a body, or a byte of it now and then) holds its connection
forever, and httptools reads headers of any size.

``guarded_protocol(connections)`` is uvicorn's httptools protocol (``uvicorn[standard]`` installs it)
with these guards (``settings.Connections``): a request's headers must be complete within
``header_timeout`` seconds of its first byte (of the connection, for the first request: a client that
sends nothing is closed too) and hold at most ``max_header_bytes`` (431, counted before they are parsed);
its body may pause at most ``read_timeout`` seconds between chunks and must be whole within
``body_timeout`` seconds of its headers. A client too slow gets ``408``. Either way the connection is
closed. ``make_server`` passes it to uvicorn with ``limit_concurrency`` and ``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import logging
import re

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from sbert.serve.settings import Connections

log = logging.getLogger("uvicorn.error")
REFUSED = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n"
HEADERS_END = re.compile(rb"\r?\n\r?\n")  # the blank line after the headers (a bare LF is read as a line end too)


def _error(message: str, code: str) -> bytes:
    body = f'{{"error": {{"message": "{message}", "type": "invalid_request_error", "param": null, "code": "{code}"}}}}'
    return body.encode()


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header and body deadlines and a bound on the headers' size
    (``settings.Connections``)."""

    guard: Connections = Connections()  # (uvicorn keeps its set of open connections in .connections)
    _timer: asyncio.TimerHandle | None = None
    _waiting_for: str = "headers"  # "headers", "body", or "idle" between requests
    _body_deadline: float = 0.0
    _header_bytes: int = 0  # bytes received since the last request's headers were complete
    _tail: bytes = b""  # the last bytes of those, where the blank line ending the headers may begin

    def _arm(self, seconds: float, waiting_for: str) -> None:
        self._disarm()
        self._waiting_for = waiting_for
        self._timer = self.loop.call_later(max(seconds, 0.0), self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm_body(self) -> None:
        """The body's next deadline: the longest pause, or the whole body's time limit if that comes first."""
        self._arm(min(self.guard.read_timeout, self._body_deadline - self.loop.time()), "body")

    def _expired(self) -> None:
        self._timer = None
        if self.transport is None or self.transport.is_closing():
            return
        if self._waiting_for == "body" and self.flow is not None and self.flow.read_paused:
            self._arm(self.guard.read_timeout, "body")  # the server paused reading, not the client
            return
        if self._waiting_for == "headers":
            limit, setting, what = self.guard.header_timeout, "--header-timeout", "headers"
        elif self.loop.time() >= self._body_deadline - 1e-3:
            limit, setting, what = self.guard.body_timeout, "--body-timeout", "whole body"
        else:
            limit, setting, what = self.guard.read_timeout, "--read-timeout", "body (its next bytes)"
        log.info("closing a connection from %s: its request's %s took over %g s", self.client, what, limit)
        message = f"the request's {what} did not arrive within {limit:g} s ({setting})"
        self._refuse(408, b"Request Timeout", _error(message, "request_timeout"))

    def _refuse(self, status: int, reason: bytes, body: bytes) -> None:
        """Answer ``status`` and close the connection (only close it where a response is half sent)."""
        if self.cycle is None or not self.cycle.response_started or self.cycle.response_complete:
            self.transport.write(REFUSED % (status, reason, len(body)) + body)
        self.transport.close()

    def _headers_too_large(self) -> None:
        limit = self.guard.max_header_bytes
        log.info("closing a connection from %s: its request's headers are over %d bytes", self.client, limit)
        message = f"the request line and headers are over the limit of {limit} bytes (--max-header-kb)"
        self._refuse(431, b"Request Header Fields Too Large", _error(message, "headers_too_large"))

    def data_received(self, data: bytes) -> None:
        """Count the bytes of unfinished headers before httptools parses (and keeps) them."""
        if self._waiting_for != "body" and not self.transport.is_closing():
            before, window = self._header_bytes, self._tail + data
            self._header_bytes, self._tail = before + len(data), window[-3:]
            if self._header_bytes > self.guard.max_header_bytes:
                end = HEADERS_END.search(window)  # where the headers end, if they do in these bytes
                if end is None or before + end.end() - len(window) + len(data) > self.guard.max_header_bytes:
                    return self._headers_too_large()
        super().data_received(data)

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
        self._header_bytes, self._tail = 0, b""
        self._body_deadline = self.loop.time() + self.guard.body_timeout
        self._arm_body()

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._arm_body()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._waiting_for = "idle"


def guarded_protocol(connections: Connections) -> type[GuardedProtocol]:
    """``GuardedProtocol`` with these time-outs and bounds, for ``uvicorn.Config(http=...)``."""
    return type("GuardedProtocol", (GuardedProtocol,), {"guard": connections})
