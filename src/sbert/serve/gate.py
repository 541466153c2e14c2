"""The service's one middleware: auth, the body size limit, metrics per route and JSON 500s.

Pure ASGI (cheaper than Starlette's ``@app.middleware``). Unexpected errors become a JSON 500 here:
Starlette would re-raise them, and uvicorn would then close the client's keep-alive connection.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sbert.serve.auth import authorized, unauthorized
from sbert.serve.errors import ApiError, crashed

log = logging.getLogger("uvicorn.error")  # the server's error log

Observe = Callable[[str, int, float], None]  # (route label, status, seconds)


class _TooBig(Exception):
    pass


class Gate:
    """Refuses unauthorised requests (401) and bodies over ``limit`` bytes (413, by Content-Length or
    while streaming), counts every request with ``observe`` under ``route_of(scope)``, and turns an
    unexpected error into a JSON 500 that keeps the connection open."""

    def __init__(self, app, limit: int, api_key: str | None, observe: Observe, route_of: Callable[[dict], str]) -> None:
        self.app, self.limit, self.api_key, self.observe, self.route_of = app, limit, api_key, observe, route_of
        self.too_big = ApiError(413, f"request body over the limit of {limit} bytes", code="body_too_large")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        began, route, status = time.perf_counter(), self.route_of(scope), 500
        try:
            status = await self._refusal(scope, receive, send) or await self._serve(scope, receive, send, route)
        finally:
            self.observe(route, status, time.perf_counter() - began)

    async def _refusal(self, scope, receive, send) -> int | None:
        """Answer a request refused on its headers alone (401, 413) and return its status, else None."""
        headers = dict(scope.get("headers") or [])
        if not authorized(self.api_key, scope["path"], headers):
            await unauthorized().response()(scope, receive, send)
            return 401
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self.too_big.response()(scope, receive, send)
            return 413
        return None

    async def _serve(self, scope, receive, send, route: str) -> int:
        """Run the app with the body counted as it arrives; the status answered."""
        seen, status, started = 0, 500, False

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooBig
            return message

        async def sent(message: dict[str, Any]) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
            await send(message)

        try:
            await self.app(scope, counted, sent)
        except _TooBig:
            await self.too_big.response()(scope, receive, send)
            return 413
        except Exception as err:
            if started:  # half a response is out: nothing to do but let the server close the connection
                raise
            log.exception("unexpected error on %s %s", scope.get("method"), route)
            await crashed(err).response()(scope, receive, send)
            return 500
        return status
