"""Errors in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, for every failure.

``ApiError`` is a refusal with its status; ``from_validation`` turns a request model's pydantic
errors into one (400, not FastAPI's 422, naming the field); ``install`` makes FastAPI answer every
error (unknown paths, crashes; an index that cannot be reached: 503) in the same shape.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from sbert.errors import IndexUnavailableError
from sbert.serve.responses import json_response

KINDS = {401: "authentication_error", 404: "not_found_error", 413: "invalid_request_error"}


class ApiError(Exception):
    """A request error with its HTTP status, in OpenAI's error shape."""

    def __init__(
        self, status: int, message: str, param: str | None = None, code: str | None = None, kind: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict:
        kind = self.kind or KINDS.get(self.status, "invalid_request_error" if self.status < 500 else "server_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def response(self) -> Response:
        return json_response(self.body(), self.status)


def crashed(err: BaseException) -> ApiError:
    """The 500 for an unexpected error (its type only: no internals leak to the client)."""
    return ApiError(500, f"internal error: {type(err).__name__}")


def from_validation(err: ValidationError | RequestValidationError) -> ApiError:
    """The first of a request model's errors as an ApiError: the request models' own refusals keep
    their message, status, param and code (see ``sbert.serve.schemas.refuse``); pydantic's own
    ("Input should be ...") are phrased "'field' must be ...", with status 400."""
    errors = err.errors()
    first: dict[str, Any] = errors[0] if errors else {}
    loc = [part for part in first.get("loc", ()) if part != "body"]
    ctx = first.get("ctx") or {}
    if first.get("type") == "refused":
        return ApiError(ctx.get("status", 400), ctx["message"], ctx.get("param"), ctx.get("code"), ctx.get("kind"))
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    message = str(first.get("msg", "bad value")).replace("Input should be", "must be", 1)
    if first.get("type") == "missing":
        message = "is required"
    return ApiError(
        400, f"'{where}' {message}" if where else f"invalid request: {message}", str(loc[0]) if loc else None
    )


def install(app: FastAPI) -> None:
    """Answer ApiErrors, validation errors, HTTP errors (404, 405) and crashes in OpenAI's shape."""

    async def api_error(request: Request, err: ApiError) -> Response:
        return err.response()

    async def invalid(request: Request, err: RequestValidationError) -> Response:
        return from_validation(err).response()

    async def http_error(request: Request, err: StarletteHTTPException) -> Response:
        return ApiError(err.status_code, str(err.detail)).response()

    async def crash(request: Request, err: Exception) -> Response:
        return crashed(err).response()

    async def unavailable(request: Request, err: IndexUnavailableError) -> Response:
        """The index's database is down: 503 naming it (host:port/database, never a password)."""
        return ApiError(503, str(err), code="index_unavailable").response()

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(IndexUnavailableError, unavailable)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, crash)
