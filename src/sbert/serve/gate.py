"""The service's one middleware: Host and Origin checks (CORS), auth, the body's type and size, security
headers, metrics per route, JSON 500s, and the cancelling of requests whose client went away.

Pure ASGI (cheaper than Starlette's ``@app.middleware``). Unexpected errors become a JSON 500 here:
Starlette would re-raise them, and uvicorn would then close the client's keep-alive connection.
"""

from __future__ import annotations

import asyncio
import contextlib
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
CLOSE = (b"connection", b"close")
GONE = 499  # the status counted for a request whose client went away before its answer (nginx's)


class _TooBig(Exception):
    pass


class Gate:
    """Refuses requests whose ``Host`` does not name the service (400) or from another web page's origin
    that ``policy`` does not allow (403; allowed ones get CORS headers and preflights their 204),
    unauthorised ones (401), bodies not sent as JSON (415) or over ``limit`` bytes (413, by Content-Length
    or while streaming); counts every request with ``observe`` under ``route_of(scope)``, and turns an
    unexpected error into a JSON 500 that keeps the connection open. An answer sent before the request's
    body was read whole closes the connection (the rest of the body is not waited for). Once the body is
    read, a client that goes away cancels its request (its texts leave the model's queue: ``GONE``)."""

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
        body = _Body(headers)

        async def headed(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra, *body.closing()]}
            await send(message)

        try:
            status = await self._refusal(scope, receive, headed, headers, origin) or await self._serve(
                scope, receive, headed, route, body
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

    async def _serve(
        self, scope, receive, send, route: str, body: _Body
    ) -> int:  # long: app, receive, send and watch share one request's state
        """Run the app with the body counted as it arrives, cancelled if the client goes away once the body
        is read; the status answered."""
        seen, status, started, answered, gone = 0, 500, False, False, False

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooBig
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                body.read.set()
            return message

        async def sent(message: dict[str, Any]) -> None:
            nonlocal status, started, answered
            if message["type"] == "http.response.start":
                status, started = message["status"], True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        app = asyncio.ensure_future(self.app(scope, counted, sent))

        async def watch() -> None:
            """Once the app has read the body, the next message is the end of the request: the client gone,
            or the answer sent. The client gone first, the app is cancelled."""
            nonlocal gone
            await body.read.wait()
            message = await receive()
            if message["type"] == "http.disconnect" and not answered and not app.done():
                gone = True
                log.info("%s %s: the client went away; its request is cancelled", scope.get("method"), route)
                app.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await app
        except asyncio.CancelledError:
            if not gone:
                raise  # this task itself is being cancelled (the server shutting down)
            return GONE
        except _TooBig:
            await self.too_big.response()(scope, receive, send)
            return 413
        except ClientDisconnect:  # the client went away (or was timed out) mid-body: no one to answer
            return GONE
        except Exception as err:
            if started:  # half a response is out: nothing to do but let the server close the connection
                raise
            log.exception("unexpected error on %s %s", scope.get("method"), route)
            await crashed(err).response()(scope, receive, send)
            return 500
        finally:
            watcher.cancel()
            if not app.done():
                app.cancel()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await app
        return status


class _Body:
    """Whether a request has a body (``none``: neither a Content-Length nor chunks) and the app has read it
    whole (``read``, set by the app's last read): an answer sent before closes the connection."""

    def __init__(self, headers: dict[bytes, bytes]) -> None:
        self.read = asyncio.Event()
        length = headers.get(b"content-length", b"").strip()
        self.none = b"transfer-encoding" not in headers and length in (b"", b"0")

    def closing(self) -> list[tuple[bytes, bytes]]:
        return [] if self.none or self.read.is_set() else [CLOSE]
