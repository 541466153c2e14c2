"""The HTTP service: an OpenAI-compatible /v1/embeddings plus /similarity, /search, /health, /metrics.

``create_app(encoder, ...)`` builds a FastAPI app; ``sbert serve`` runs it with uvicorn. Embedding
runs on the dynamic batcher's worker thread, never on the event loop. Errors use OpenAI's shape:
``{"error": {"message", "type", "param", "code"}}`` with a 4xx status for bad requests.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import re
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

from sbert.encoder import check_texts
from sbert.errors import ModelNotFoundError
from sbert.registry import canonical_name, known_names, resolve
from sbert.serve.batcher import DynamicBatcher

log = logging.getLogger("uvicorn.error")  # the server's error log
UNMATCHED = "(unmatched)"  # the /metrics label of every path no route serves
MAX_INT_DIGITS = 100  # longer integers in a request body are refused (Python's own limit, 4300, raises ValueError)


@dataclass
class Limits:
    """Request limits: inputs per request, characters per input, request body bytes."""

    max_inputs: int = 2048
    max_chars: int = 100_000
    max_body_bytes: int = 16 * 2**20


class ApiError(Exception):
    """A request error with its HTTP status, in OpenAI's error shape."""

    def __init__(
        self, status: int, message: str, param: str | None = None, code: str | None = None, kind: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict:
        kinds = {401: "authentication_error", 404: "not_found_error", 413: "invalid_request_error"}
        kind = self.kind or kinds.get(self.status, "invalid_request_error" if self.status < 500 else "server_error")
        return {
            "error": {
                "message": self.message,
                "type": kind,
                "param": self.param,
                "code": self.code,
            }
        }


def _texts(value: Any, param: str, limits: Limits) -> list[str]:
    """A string or a list of strings, checked against the limits; ApiError(400) naming what is wrong."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ApiError(400, f"'{param}' must be a non-empty string or a non-empty list of strings", param)
    if len(items) > limits.max_inputs:
        raise ApiError(
            400, f"'{param}' has {len(items)} items; the limit is {limits.max_inputs}", param, "too_many_inputs"
        )
    for i, text in enumerate(items):
        if not isinstance(text, str):
            kind = "token arrays are not supported; send text" if isinstance(text, (int, list)) else type(text).__name__
            raise ApiError(400, f"'{param}[{i}]' must be a string ({kind})", param)
        if not text.strip():
            raise ApiError(400, f"'{param}[{i}]' is empty; empty strings cannot be embedded", param, "empty_input")
        if len(text) > limits.max_chars:
            raise ApiError(
                400,
                f"'{param}[{i}]' has {len(text)} characters; the limit is {limits.max_chars}",
                param,
                "input_too_long",
            )
    try:
        check_texts(items)  # what the model cannot encode (lone surrogates), refused before it joins a batch
    except (TypeError, ValueError) as err:
        message = re.sub(r"^texts\[(\d+)\]", lambda m: f"'{param}[{m.group(1)}]'", str(err))
        raise ApiError(400, message, param, "invalid_input") from None
    return items


def _parse_int(digits: str) -> int:
    """json's integer parser, refusing numbers too long to be a sensible value (and to convert quickly)."""
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ApiError(
            400, f"request body holds an integer of {len(digits)} digits; the limit is {MAX_INT_DIGITS} digits"
        )
    return int(digits)


def _served_names(model_name: str, encoder) -> frozenset[str]:
    """The ``model`` values /v1/embeddings accepts: the served name, its folder and the aliases of that model."""
    names = {model_name, canonical_name(model_name)}
    folder = Path(encoder.path).resolve() if getattr(encoder, "path", None) is not None else None
    if folder is not None:
        names |= {str(encoder.path), str(folder)}
    for name in known_names():
        if canonical_name(name) == canonical_name(model_name):
            names.add(name)
        elif folder is not None:
            try:
                if resolve(name).resolve() == folder:
                    names.add(name)
            except ModelNotFoundError:  # its package is not installed
                pass
    return frozenset(names)


def _json(payload: Any, status: int = 200) -> Response:
    """A JSON response; numpy arrays in ``payload`` are written directly (orjson), not via lists."""
    return Response(
        orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY), status_code=status, media_type="application/json"
    )


class _Gate:
    """Pure ASGI middleware (cheaper than Starlette's ``@app.middleware``): bearer-token auth, the body
    size limit (413, by Content-Length or while streaming), request counts and latency per route, and
    unexpected errors turned into a JSON 500 (Starlette would re-raise them, and uvicorn then closes the
    client's keep-alive connection)."""

    def __init__(
        self,
        app,
        limit: int,
        api_key: str | None,
        observe: Callable[[str, int, float], None],
        route_of: Callable[[dict], str],
    ) -> None:
        self.app, self.limit, self.api_key, self.observe, self.route_of = app, limit, api_key, observe, route_of

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, headers, began = scope["path"], dict(scope.get("headers") or []), time.perf_counter()
        route = self.route_of(scope)
        if self.api_key and path not in ("/health", "/metrics"):
            header = headers.get(b"authorization", b"").decode("latin-1")
            token = header[7:] if header.lower().startswith("bearer ") else ""
            if not hmac.compare_digest(token.encode(), self.api_key.encode()):
                error = ApiError(
                    401, "missing or wrong API key (send 'Authorization: Bearer <key>')", code="invalid_api_key"
                )
                self.observe(route, 401, time.perf_counter() - began)
                return await _json(error.body(), 401)(scope, receive, send)
        too_big = ApiError(413, f"request body over the limit of {self.limit} bytes", code="body_too_large")
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            self.observe(route, 413, time.perf_counter() - began)
            return await _json(too_big.body(), 413)(scope, receive, send)
        seen, status, started = 0, 500, False

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooBig
            return message

        async def sent(message):
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
            await send(message)

        try:
            await self.app(scope, counted, sent)
        except _TooBig:
            status = 413
            await _json(too_big.body(), 413)(scope, receive, send)
        except Exception as err:
            if started:  # half a response is out: nothing to do but let the server close the connection
                raise
            log.exception("unexpected error on %s %s", scope.get("method"), route)
            status = 500
            await _json(ApiError(500, f"internal error: {type(err).__name__}").body(), 500)(scope, receive, send)
        finally:
            self.observe(route, status, time.perf_counter() - began)


class _TooBig(Exception):
    pass


def create_app(
    encoder,
    *,
    model_name: str = "default",
    index=None,
    api_key: str | None = None,
    limits: Limits | None = None,
    max_batch_texts: int = 256,
    max_wait_ms: float = 5.0,
    encode_batch_size: int = 32,
    max_tokens: int | None = None,
    cross_encoder=None,
    packing: bool | None = None,
    workers: int = 1,
):
    """The FastAPI app serving ``encoder`` (and ``index``, a VectorIndex, for /search).

    Each merged batch of up to ``max_batch_texts`` texts is embedded by one ``encode`` call. With
    ``packing`` (default: on where the model and backend allow it) the batch runs unpadded, in
    forward passes of up to ``max_tokens`` real tokens; without it, in sorted batches of
    ``encode_batch_size`` texts and ``max_tokens`` padded slots (see ``Encoder.encode``). With a
    ``cross_encoder``, /search re-ranks its candidates on request (``"rerank": true``, ``"candidates": 100``).
    ``workers`` > 1 runs that many batches side by side and divides torch's threads among them (a
    process-wide setting).
    """
    can_pack = encoder.backend is None and encoder.transformer.can_pack
    if packing and not can_pack:
        raise ValueError("packing needs the torch backend and a BERT-family model")
    packing = can_pack if packing is None else packing
    backend = None
    if index is not None:
        from sbert.search.index import backend_name

        backend = backend_name(encoder)
    forward_texts = max_batch_texts if packing else encode_batch_size
    limits = limits or Limits()
    registry = CollectorRegistry()
    requests = Counter("sbert_requests", "HTTP requests", ["endpoint", "status"], registry=registry)
    latency = Histogram(
        "sbert_request_seconds",
        "Request latency",
        ["endpoint"],
        registry=registry,
        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    )
    batch_sizes = Histogram(
        "sbert_batch_texts", "Texts per model batch", registry=registry, buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    )
    batch_seconds = Histogram("sbert_batch_seconds", "Seconds per model batch", registry=registry)
    embedded = Counter("sbert_texts_embedded", "Texts embedded", registry=registry)

    def encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings and token counts (for ``usage``), on the batcher's worker thread."""
        ids, _ = encoder.transformer.tokenize(texts)
        counts = np.array([len(i) for i in ids])
        vectors = encoder.encode(
            texts,
            batch_size=forward_texts,
            max_tokens=max_tokens,
            packing=packing,
            show_progress=False,
            on_truncation="ignore",
        )
        return vectors, counts

    if workers > 1 and encoder.backend is None:
        torch.set_num_threads(max(1, torch.get_num_threads() // workers))
    batcher = DynamicBatcher(encode, max_batch_texts=max_batch_texts, max_wait_ms=max_wait_ms, workers=workers)

    def on_batch(n: int, seconds: float) -> None:
        batch_sizes.observe(n)
        batch_seconds.observe(seconds)
        embedded.inc(n)

    batcher.stats.on_batch = on_batch

    @asynccontextmanager
    async def lifespan(app):
        yield
        batcher.close()  # uvicorn stops accepting first; this drains what is queued

    app = FastAPI(title="sbert", lifespan=lifespan)

    def observe(route: str, status: int, seconds: float) -> None:
        requests.labels(route, str(status)).inc()
        latency.labels(route).observe(seconds)

    def route_of(scope: dict) -> str:
        """The path template of the route serving ``scope`` (a bounded set of labels), else UNMATCHED."""
        for candidate in app.router.routes:
            if candidate.matches(scope)[0] != Match.NONE:
                return getattr(candidate, "path", UNMATCHED)
        return UNMATCHED

    app.add_middleware(_Gate, limit=limits.max_body_bytes, api_key=api_key, observe=observe, route_of=route_of)
    app.state.batcher = batcher

    @app.exception_handler(ApiError)
    async def api_error(request, err: ApiError):
        return _json(err.body(), err.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, err: RequestValidationError):
        first = err.errors()[0] if err.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return _json(
            ApiError(400, f"invalid request: {where}: {first.get('msg', 'bad value')}", where or None).body(), 400
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, err: StarletteHTTPException):
        return _json(ApiError(err.status_code, str(err.detail)).body(), err.status_code)

    @app.exception_handler(Exception)
    async def crash(request, err: Exception):
        return _json(ApiError(500, f"internal error: {type(err).__name__}").body(), 500)

    async def body_of(request: Request) -> dict:
        try:
            payload = json.loads(await request.body(), parse_int=_parse_int)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ApiError(400, f"request body is not valid JSON: {err}") from err
        except RecursionError:
            raise ApiError(400, "request body is nested too deeply (arrays or objects inside each other)") from None
        if not isinstance(payload, dict):
            raise ApiError(400, "request body must be a JSON object")
        return payload

    served = _served_names(model_name, encoder)

    def check_model(requested: Any) -> None:
        """Refuse a ``model`` this server does not serve, in OpenAI's 404 shape (absent: the served one)."""
        if requested is not None and not isinstance(requested, str):
            raise ApiError(400, "'model' must be a string", "model")
        if requested is None or requested in served:
            return
        raise ApiError(
            404,
            f"the model {requested!r} does not exist here: this server serves {model_name!r} "
            f"(also accepted: {', '.join(repr(n) for n in sorted(served - {model_name}))})",
            "model",
            "model_not_found",
            kind="invalid_request_error",
        )

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": model_name, "dim": encoder.dim, "index": index is not None}

    @app.get("/metrics")
    async def metrics():
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        body = await body_of(request)
        check_model(body.get("model"))
        texts = _texts(body.get("input"), "input", limits)
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise ApiError(400, "'encoding_format' must be 'float' or 'base64'", "encoding_format")
        dims = body.get("dimensions")
        if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= encoder.dim):
            raise ApiError(400, f"'dimensions' must be an integer from 1 to {encoder.dim}", "dimensions")
        truncate = body.get("truncate", True)
        if not isinstance(truncate, bool):
            raise ApiError(400, "'truncate' must be true or false", "truncate")
        if not truncate:
            _, truncated = await run_in_threadpool(encoder.transformer.tokenize, texts)
            if truncated:
                raise ApiError(
                    400,
                    f"input[{truncated[0]}] is longer than the model's {encoder.max_seq_length} tokens "
                    "(send truncate=true to cut it)",
                    "input",
                    "input_too_long",
                )
        vectors, counts = await batcher.embed(texts)
        if dims is not None and dims < vectors.shape[1]:
            vectors = vectors[:, :dims]
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(v.tobytes()).decode() if fmt == "base64" else v,
            }
            for i, v in enumerate(vectors)
        ]
        tokens = int(counts.sum())
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return _json({"object": "list", "data": data, "model": body.get("model") or model_name, "usage": usage})

    @app.post("/similarity")
    async def similarity(request: Request):
        from sbert import similarity as sim

        body = await body_of(request)
        a = _texts(body.get("a"), "a", limits)
        b = _texts(body["b"], "b", limits) if body.get("b") is not None else None
        mode = body.get("mode", "matrix")
        if mode not in ("matrix", "pairwise"):
            raise ApiError(400, "'mode' must be 'matrix' or 'pairwise'", "mode")
        if mode == "pairwise" and (b is None or len(a) != len(b)):
            raise ApiError(400, "'pairwise' needs 'a' and 'b' of the same length", "b")
        vectors, _ = await batcher.embed(a + (b or []))
        va, vb = vectors[: len(a)], vectors[len(a) :] if b is not None else vectors[: len(a)]
        fn = sim.get(encoder.similarity_fn_name, pairwise=mode == "pairwise")
        return _json({"mode": mode, "similarity": encoder.similarity_fn_name, "scores": fn(va, vb)})

    @app.post("/search")
    async def search(request: Request):
        if index is None:
            raise ApiError(404, "no index is loaded: start the server with --index DIR", code="no_index")
        body = await body_of(request)
        queries = _texts(body.get("query"), "query", limits)
        k = body.get("k", 10)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
            raise ApiError(400, "'k' must be an integer from 1 to 1000", "k")
        method = body.get("method")
        index.refresh()  # another process may have written a new version (with other structures)
        if method not in (None, "exact", *index.structures):
            raise ApiError(400, f"'method' must be exact or one of {index.structures}", "method")
        want_rerank = body.get("rerank", False)
        if not isinstance(want_rerank, bool):
            raise ApiError(400, "'rerank' must be true or false", "rerank")
        if want_rerank and cross_encoder is None:
            raise ApiError(400, "no cross-encoder is loaded: start the server with --rerank MODEL", "rerank")
        candidates = body.get("candidates", 100)
        if not isinstance(candidates, int) or isinstance(candidates, bool) or not 1 <= candidates <= 1000:
            raise ApiError(400, "'candidates' must be an integer from 1 to 1000", "candidates")
        vectors, _ = await batcher.embed(queries)
        fetch = max(k, candidates) if want_rerank else k
        hits = await run_in_threadpool(index.search, vectors, fetch, method=method, backend=backend)
        if want_rerank:
            from sbert.search.rerank import rerank

            hits = [
                await run_in_threadpool(rerank, cross_encoder, q, found, k)
                for q, found in zip(queries, hits, strict=True)
            ]
        results = [
            {"query": q, "hits": [{"id": h.id, "score": h.score, "text": h.text} for h in found]}
            for q, found in zip(queries, hits, strict=True)
        ]
        return _json({"results": results})

    return app
