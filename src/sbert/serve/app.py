"""The HTTP service: an OpenAI-compatible /v1/embeddings plus /similarity, /search, /info, /health, /metrics,
and a web page at / that searches and compares with them.

``create_app(encoder, ...)`` wires the pieces into a FastAPI app; ``sbert serve`` runs it with
uvicorn. The pieces: ``engine`` (dynamic batching, packing, workers: how the model runs),
``schemas`` and ``responses`` (request and response bodies), ``routes`` (the endpoints),
``errors`` (OpenAI's error shape), ``gate`` with ``auth`` and ``metrics`` (the middleware), ``page`` (the
web page and its files).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI

from sbert.errors import ModelNotFoundError
from sbert.model_names import canonical_name, known_names, resolve
from sbert.protocols import PairScorer
from sbert.search.searcher import Searcher
from sbert.serve import errors
from sbert.serve.access import Policy
from sbert.serve.adapters import adapter_engines
from sbert.serve.auth import check_api_key
from sbert.serve.engine import ServedEncoder
from sbert.serve.gate import Gate
from sbert.serve.metrics import Metrics, route_label
from sbert.serve.page import add_page
from sbert.serve.routes import Service, add_routes
from sbert.serve.schemas import Context
from sbert.serve.settings import Access, EngineSettings, Limits

if TYPE_CHECKING:
    from sbert.shared_base import SharedBase

__all__ = ["Access", "EngineSettings", "Limits", "create_app"]
IN_PROCESS = Access(allowed_hosts=("testserver",))  # create_app's default: loopback, or Starlette's TestClient


def create_app(
    encoder: ServedEncoder,
    *,
    model_name: str = "default",
    index=None,
    api_key: str | None = None,
    limits: Limits | None = None,
    engine: EngineSettings | None = None,
    cross_encoder: PairScorer | None = None,
    access: Access | None = None,
    adapters: SharedBase | None = None,
    index_adapter: str | dict[str, str | None] | None = None,
) -> FastAPI:  # long: the signature and its documentation, one keyword per thing the app serves
    """The FastAPI app serving ``encoder`` (and ``index``, an index, for /search; or several as a dict by
    name, which a search names as ``index``) as ``model_name`` (answers name it as ``shown_name`` does).

    ``engine`` says how requests' texts are merged into batches and run (see ``EngineSettings``).
    With a ``cross_encoder``, /search re-ranks its candidates on request (``"rerank": true``).
    ``api_key`` requires ``Authorization: Bearer KEY`` on every endpoint but /health, /metrics and the page
    (a key clients cannot send is refused here: ``auth.check_api_key``). ``access`` says which ``Host``
    headers and cross-origin pages are accepted (see ``Access``; ``serve`` passes the bound address). By
    default: served on 127.0.0.1, no CORS, and also the Host ``testserver`` that Starlette's TestClient sends.
    ``adapters``: LoRA adapters over ``encoder``'s base (``encoder`` is then ``adapters.encoder(None)``), each
    served by its name (``model`` in /v1/embeddings; /v1/models lists them), by the base's workers, one adapter a
    batch;
    ``index_adapter``: the one that made ``index``'s vectors, which /search embeds its queries with (several
    indexes: a dict by index name; an index left out, or None: the base's).
    """
    check_api_key(api_key)
    limits = limits or Limits()
    metrics = Metrics()
    indexes = dict(index) if isinstance(index, dict) else {} if index is None else {"": index}
    own = dict(index_adapter) if isinstance(index_adapter, dict) else dict.fromkeys(indexes, index_adapter)
    shown = shown_name(model_name)
    embedding, named = adapter_engines(encoder, adapters, served_names(model_name, encoder), engine)
    fuses = {name: bool(each.lexical) for name, each in indexes.items()}
    embedding.batcher.stats.on_batch = metrics.on_batch
    context = Context(limits, encoder.dim, shown, served_names(model_name, encoder) | {shown, *named}, fuses)
    searchers = {  # each index searched with what made its vectors: its own adapter, or the base
        name: Searcher(each, named[adapter].encoder if (adapter := own.get(name)) else encoder, cross_encoder)
        for name, each in indexes.items()
    }
    service = Service(
        engine=embedding,
        context=context,
        similarity_fn_name=encoder.similarity_fn_name,
        searchers=searchers,
        adapters=named,
        index_adapters={name: own.get(name) for name in indexes},
        memory=adapters.memory() if adapters is not None else None,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        for each in [*named.values(), embedding]:  # uvicorn stops accepting first; this drains what is queued
            await asyncio.to_thread(each.close)

    app = FastAPI(title="sbert", lifespan=lifespan)
    app.state.service, app.state.engine, app.state.metrics = service, embedding, metrics
    add_routes(app)
    add_page(app)
    errors.install(app)
    app.add_middleware(
        Gate,
        limit=limits.max_body_bytes,
        api_key=api_key,
        observe=metrics.observe,
        route_of=lambda scope: route_label(app.router.routes, scope),
        policy=Policy.of(access or IN_PROCESS),
    )
    return app


def shown_name(model_name: str) -> str:
    """How answers and errors name the served model (/health is open to all): ``model_name``, but a folder
    given by its absolute path by the folder's own name (with its parent's, where that is a shipped
    model's name), so that no answer tells where on the server it lies."""
    path = Path(model_name).expanduser()
    if not path.is_absolute() or not path.name:
        return model_name
    return path.name if path.name not in known_names() else f"{path.parent.name}/{path.name}"


def served_names(model_name: str, encoder: ServedEncoder) -> frozenset[str]:
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
