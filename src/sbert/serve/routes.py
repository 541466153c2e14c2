"""The service's endpoints, each a few lines: read the request model, ask the engine, answer.

Every route finds what it serves in ``request.app.state.service`` (a ``Service``, built by
``create_app``). Embedding runs on the engine's worker threads; parsing bodies, search and re-ranking
on Starlette's thread pool: never on the event loop.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from sbert import similarity
from sbert.search.retrieve import SearchOptionError, SearchOptions
from sbert.search.searcher import Searcher
from sbert.serve.engine import Embedded, EmbeddingEngine, Lane
from sbert.serve.errors import ApiError
from sbert.serve.responses import (
    EmbeddingResponse,
    Health,
    Info,
    SearchResponse,
    SimilarityResponse,
    json_response,
)
from sbert.serve.schemas import Context, EmbeddingRequest, RequestModel, SearchRequest, SimilarityRequest, parse


@dataclass
class Service:
    """What the routes serve: the engine, request context, similarity function, and for /search each index
    by name ("": one served without a name) with the encoder that made its vectors and the cross-encoder (a
    ``Searcher``: ``sbert search``'s own) and the adapter it was built with (None: the base)."""

    engine: EmbeddingEngine
    context: Context
    similarity_fn_name: str = "cosine"
    searchers: dict[str, Searcher] = field(default_factory=dict)
    adapters: dict[str, EmbeddingEngine | Lane] = field(default_factory=dict)  # LoRA adapters over the base, by name
    index_adapters: dict[str, str | None] = field(default_factory=dict)  # each index's adapter (/search embeds with it)
    memory: dict | None = None  # bytes of weights: the base's and each adapter's (``SharedBase.memory``)

    @property
    def index(self) -> Any:
        """The index /search searches where one is served (None: none, or several)."""
        return next(iter(self.searchers.values())).index if len(self.searchers) == 1 else None

    def engine_for(self, model: str | None) -> EmbeddingEngine | Lane:
        """The way in of the adapter named ``model`` (its ``Lane`` into the base's engine); the base's engine for
        any other served name (or none)."""
        return self.adapters.get(model or "", self.engine)

    async def read(self, request: Request, model: type[RequestModel]) -> RequestModel:
        """The request's body as ``model``, validated against this server (ApiError otherwise), parsed on a
        worker thread: a large body takes the CPU for a while, other requests' answers must not wait."""
        return await run_in_threadpool(parse, await request.body(), model, self.context)


def add_routes(app: FastAPI) -> None:
    """Serve the endpoints on ``app`` itself (not through a sub-router: the gate labels /metrics by
    matching the app's own routes, before routing)."""
    app.add_api_route("/health", health, methods=["GET"], response_model=Health)
    app.add_api_route("/metrics", metrics, methods=["GET"])
    app.add_api_route("/info", info, methods=["GET"], response_model=Info)
    app.add_api_route("/v1/embeddings", embeddings, methods=["POST"], response_model=EmbeddingResponse)
    app.add_api_route("/v1/models", models, methods=["GET"])
    app.add_api_route("/similarity", similarity_scores, methods=["POST"], response_model=SimilarityResponse)
    app.add_api_route("/search", search, methods=["POST"], response_model=SearchResponse)


def _service(request: Request) -> Service:
    return request.app.state.service


async def health(request: Request) -> dict:
    service = _service(request)
    return {
        "status": "ok",
        "model": service.context.model_name,
        "dim": service.context.dim,
        "index": bool(service.searchers),
    }


async def metrics(request: Request) -> Response:
    return request.app.state.metrics.response()


async def info(request: Request) -> Response:
    service = _service(request)
    context, encoder = service.context, service.engine.encoder
    index = None if service.index is None else await run_in_threadpool(_index_info, service.index)
    model = {"model": context.model_name, "dim": context.dim, "similarity": service.similarity_fn_name}
    named = {}  # several indexes, each by its name (then "index" is null: a search names one)
    for name, searcher in service.searchers.items() if len(service.searchers) > 1 else ():
        named[name] = {**await run_in_threadpool(_index_info, searcher.index), "adapter": service.index_adapters[name]}
    more = {"indexes": named} if named else {}
    return json_response({**model, "max_seq_length": encoder.max_seq_length, "index": index, **more})


def _index_info(index) -> dict:
    """The index's size and abilities as /info answers them, from its newest version on disk."""
    index.refresh()
    size = len(index.document_ids) if index.documents else len(index)
    methods = ["exact", *index.structures]
    return {
        "size": size,
        "rows": len(index),
        "documents": bool(index.documents),
        "lexical": index.lexical,
        "methods": methods,
        "metric": index.metric,
    }


async def models(request: Request) -> Response:
    """OpenAI's model list: the served model and each adapter over it, with the bytes of weights each holds."""
    service = _service(request)
    memory = service.memory or {}
    base = {"id": service.context.model_name, "object": "model", "owned_by": "sbert"}
    data = [{**base, **({"memory_bytes": memory["base"]} if memory else {})}]
    for name in service.adapters:
        data.append({"id": name, "object": "model", "owned_by": "sbert", "base": service.context.model_name})
        data[-1]["memory_bytes"] = memory.get("adapters", {}).get(name)
    return json_response({"object": "list", "data": data})


async def embeddings(request: Request) -> Response:
    service = _service(request)
    body = await service.read(request, EmbeddingRequest)
    engine = service.engine_for(body.model)  # an adapter's texts: never in one forward pass with another's
    embedded = await engine.embed(body.input, _prompt(service, body.prompt_name, body.prompt, engine=engine))
    if not body.truncate and embedded.first_truncated is not None:
        raise ApiError(
            400,
            f"input[{embedded.first_truncated}] is longer than the model's "
            f"{engine.encoder.max_seq_length} tokens (send truncate=true to cut it)",
            "input",
            "input_too_long",
        )
    return json_response(_embedding_body(body, embedded, service.context.model_name))


async def similarity_scores(request: Request) -> Response:
    service = _service(request)
    body = await service.read(request, SimilarityRequest)
    vectors = (await service.engine.embed(body.a + (body.b or []))).vectors
    a, b = vectors[: len(body.a)], vectors[len(body.a) :] if body.b is not None else vectors
    scores = similarity.get(service.similarity_fn_name, pairwise=body.mode == "pairwise")(a, b)
    return json_response({"mode": body.mode, "similarity": service.similarity_fn_name, "scores": scores})


async def search(request: Request) -> Response:
    service = _service(request)
    if not service.searchers:
        raise ApiError(404, "no index is loaded: start the server with --index DIR", code="no_index")
    body = await service.read(request, SearchRequest)  # its index: the one it names (checked), or the only one
    searcher = service.searchers[body.index or ""]
    options = await run_in_threadpool(_options, searcher, body)  # refresh() may wait on a database: not on the loop
    engine = service.engine_for(service.index_adapters.get(body.index or ""))  # the index's own adapter, if any
    queries = await engine.embed(body.query, _prompt(service, task="query", engine=engine))  # as encode_query
    hits = await run_in_threadpool(searcher.search_vectors, queries.vectors, body.query, options)
    limit = service.context.limits.max_response_bytes
    _check_size(sum(len(h.id) + len(h.text or "") + 48 for found in hits for h in found), limit)  # before building it
    results = [
        {"query": query, "hits": [_hit(h) for h in found]} for query, found in zip(body.query, hits, strict=True)
    ]
    response = json_response({"results": results})
    _check_size(len(response.body), limit)
    return response


def _check_size(size: int, limit: int) -> None:
    """Refuse an answer of ``size`` bytes over ``limit`` (long texts make a few hits a large answer)."""
    if size > limit:
        raise ApiError(
            413,
            f"the answer would be about {size} bytes; the limit is {limit} bytes a response (--max-response-mb): "
            "ask for fewer queries or a smaller k",
            "k",
            "response_too_large",
        )


def _prompt(
    service: Service, prompt_name: str | None = None, prompt: str | None = None, task=None, engine=None
) -> str | None:
    """The prompt a request's texts get from ``engine``'s model (default: the served model's; its default
    prompt when none is named); 400 for an unknown name."""
    try:
        return (engine or service.engine).encoder.resolve_prompt(prompt_name, prompt, task)
    except ValueError as err:
        raise ApiError(400, str(err), "prompt_name", "unknown_prompt") from None


def _embedding_body(body: EmbeddingRequest, embedded: Embedded, model_name: str) -> dict:
    """OpenAI's embeddings response: vectors (cut to ``dimensions`` and re-normalised, as ``Encoder.encode``
    with ``truncate_dim`` and ``normalize`` does), floats or base64."""
    vectors = embedded.vectors
    if body.dimensions is not None and body.dimensions < vectors.shape[1]:
        import torch

        from sbert.pipeline import finish

        vectors = finish(torch.from_numpy(vectors), body.dimensions, normalize=True)
    vectors = np.ascontiguousarray(vectors, dtype="<f4")
    base64_out = body.encoding_format == "base64"
    data = [
        {"object": "embedding", "index": i, "embedding": base64.b64encode(v.tobytes()).decode() if base64_out else v}
        for i, v in enumerate(vectors)
    ]
    tokens = int(embedded.tokens.sum())
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": body.model or model_name, "usage": usage}


def _hit(hit) -> dict:
    """A hit as the service answers it (``sbert search --json``'s, without the row): a document's carries its
    best passage's character ``span``, a search with a ``lead`` its top hit's lead."""
    return {k: v for k, v in hit.as_json().items() if k != "row"}


def _options(searcher: Searcher, body: SearchRequest) -> SearchOptions:
    """The request's search options, as ``sbert search`` builds them (``Searcher.options``). Refused (400): a
    ``method`` the index does not hold, ``rerank`` without a cross-encoder, ``hybrid`` without a BM25 index,
    ``mode`` for an index of texts, and options that do not go together (``SearchOptionError``)."""
    index: Any = searcher.index  # a folder or database index: it has refresh() and structures
    index.refresh()  # another process may have written a new version (with other structures)
    if body.method not in (None, "exact", *index.structures):
        raise ApiError(400, f"'method' must be exact or one of {index.structures}", "method")
    if body.rerank and searcher.rerank is None:
        raise ApiError(400, "no cross-encoder is loaded: start the server with --rerank MODEL", "rerank")
    if body.hybrid and not index.lexical:
        raise ApiError(400, "the index has no BM25 index for hybrid search: build it without --no-bm25", "hybrid")
    if body.mode is not None and not index.documents:
        raise ApiError(400, "'mode' applies to an index of documents (built with --chunk)", "mode")
    try:
        return searcher.options(
            rerank=body.rerank, k=body.k, mode=body.mode, hybrid=body.hybrid, fusion=body.fusion, alpha=body.alpha,
            candidates=body.candidates, method=body.method, threshold=body.threshold, lead=body.lead,
        )  # fmt: skip
    except SearchOptionError as err:
        raise ApiError(400, str(err), err.option) from None
