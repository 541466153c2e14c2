"""The service's one middleware: Host and Origin checks (CORS), auth, the body's type and size, security
headers, metrics per route and JSON 500s.

Pure ASGI (cheaper than Starlette's ``@app.middleware``). Unexpected errors become a JSON 500 here:
Starlette would re-raise them, and uvicorn would then close the client's keep-alive connection.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import ClientDisconnect

from sbert.serve import access
from sbert.serve.access import Policy
from sbert.serve.auth import authorized, unauthorized
from sbert.serve.errors import ApiError, crashed
from sbert.serve.settings import Access

log = logging.getLogger("uvicorn.error")  # the server's error log

Observe = Callable[[str, int, float], None]  # (route label, status, seconds)


class _TooBig(Exception):
    pass


class Gate:
    """Refuses requests whose ``Host`` does not name the service (400) or from another web page's origin
    that ``policy`` does not allow (403; allowed ones get CORS headers and preflights their 204),
    unauthorised ones (401), bodies not sent as JSON (415) or over ``limit`` bytes (413, by Content-Length
    or while streaming); counts every request with ``observe`` under ``route_of(scope)``, and turns an
    unexpected error into a JSON 500 that keeps the connection open."""

    def __init__(
        self,
        app,
        limit: int,
        api_key: str | None,
        observe: Observe,
        route_of: Callable[[dict], str],
        policy: Policy | None = None,
    ) -> None:
        self.app, self.limit, self.api_key, self.observe, self.route_of = app, limit, api_key, observe, route_of
        self.policy = policy or Policy.of(Access())
        self.too_big = ApiError(
            413, f"request body over the limit of {limit} bytes (--max-body-mb)", code="body_too_large"
        )

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        began, route, status = time.perf_counter(), self.route_of(scope), 500
        headers = dict(scope.get("headers") or [])
        origin = self.policy.cross_origin(headers.get(b"origin"), headers.get(b"host"))
        allowed = origin is not None and self.policy.origin_allowed(origin)
        extra = access.SECURITY_HEADERS + (access.cors_headers(origin) if allowed else [])

        async def headed(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            status = await self._refusal(scope, receive, headed, headers, origin) or await self._serve(
                scope, receive, headed, route
            )
        finally:
            self.observe(route, status, time.perf_counter() - began)

    async def _refusal(self, scope, receive, send, headers: dict[bytes, bytes], origin: str | None) -> int | None:
        """Answer a request refused on its headers alone (400, 403, 401, 415, 413) or a CORS preflight (204)
        and return its status, else None."""
        refusal = None
        host = headers.get(b"host")
        if not self.policy.host_allowed(host):
            refusal = access.host_refused(host or b"")
        elif origin is not None and not self.policy.origin_allowed(origin):
            refusal = access.origin_refused(origin)
        elif origin is not None and scope["method"] == "OPTIONS" and b"access-control-request-method" in headers:
            await send({"type": "http.response.start", "status": 204, "headers": access.PREFLIGHT_HEADERS})
            await send({"type": "http.response.body", "body": b""})
            return 204
        elif not authorized(self.api_key, scope["path"], headers):
            refusal = unauthorized()
        else:
            refusal = access.content_type_refused(scope["method"].encode(), headers.get(b"content-type"))
        length = headers.get(b"content-length")
        if refusal is None and length is not None and length.isdigit() and int(length) > self.limit:
            refusal = self.too_big
        if refusal is None:
            return None
        await refusal.response()(scope, receive, send)
        return refusal.status

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
        except ClientDisconnect:  # the client went away (or was timed out) mid-body: no one to answer
            return 499
        except Exception as err:
            if started:  # half a response is out: nothing to do but let the server close the connection
                raise
            log.exception("unexpected error on %s %s", scope.get("method"), route)
            await crashed(err).response()(scope, receive, send)
            return 500
        return status
