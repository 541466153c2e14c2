"""The embedding service; ``sbert serve`` runs it.

``open_service`` loads what it serves (the model, an index with its own model: ``sbert.search.searcher``),
``bind``, ``make_server`` and ``serve`` (here) start it; ``app.create_app`` wires the FastAPI app from
``engine`` (how texts are batched and run), ``schemas``/``responses`` (the bodies), ``routes``,
``errors``, ``access`` and ``gate`` (Host/Origin checks, auth, limits, metrics, cancelling the requests of
clients gone away); ``connections`` times out slow clients and bounds headers. This module stays light:
the command line binds the port before it loads torch or the model.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Mapping
from typing import Any

from sbert.errors import SbertError

API_KEY_ENV = "SBERT_API_KEY"


class AddressInUseError(SbertError, OSError):
    """The host and port the service should listen on are taken (say by another ``sbert serve``)."""


def bind(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, taken before the model loads so a busy port fails at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart need not wait for TIME_WAIT
    where = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise AddressInUseError(
                f"cannot listen on {where}: the address is already in use (is another 'sbert serve' running "
                "there?); stop it or choose another --port"
            ) from None
        raise AddressInUseError(f"cannot listen on {where}: {err.strerror or err}") from None
    sock.set_inheritable(True)
    return sock


def make_server(
    app, *, sock: socket.socket, graceful_seconds: float = 30.0, access_log: bool = False, connections=None
):
    """A uvicorn server for ``app``; run it with ``server.run(sockets=[sock])``. ``connections`` (a
    ``settings.Connections``): the header and body time-outs, keep-alive and the connection cap."""
    import uvicorn

    from sbert.serve.connections import guarded_protocol
    from sbert.serve.settings import Connections

    connections = connections or Connections()
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        access_log=access_log,
        timeout_graceful_shutdown=graceful_seconds,
        http=guarded_protocol(connections),
        timeout_keep_alive=connections.keep_alive,
        limit_concurrency=connections.max_connections,
    )
    url = f"http://[{host}]:{port}" if sock.family == socket.AF_INET6 else f"http://{host}:{port}"
    logging.getLogger("uvicorn.error").info("sbert serve listening on %s (Press CTRL+C to quit)", url)
    return uvicorn.Server(config)


def open_service(
    model: str | None = None,
    *,
    index: str | Mapping[str, str] | None = None,
    rerank: str | None = None,
    backend: str = "torch",
    precision: str = "fp32",
    device: str | None = None,
    allow_pickle: bool = False,
) -> dict[str, Any]:
    """What ``serve`` serves, as its keywords (``encoder``, ``model_name``, ``index``, ``cross_encoder``): with
    ``index`` (a folder or a ``postgresql://`` URL), its ``Searcher`` (``sbert.search.searcher.open_searcher``:
    the index's own model, checked before it loads), else ``model`` (default: the default model). Several
    indexes, by name (``{"tracker-a": "ix-a", ...}``), must share one model (with LoRA adapters over one base,
    each its own: ``sbert.serve.adapters.open_adapter_service``)."""
    from sbert.search.retrieve import open_index
    from sbert.search.searcher import load_reranker, open_searcher, search_model

    if index is not None:
        named = dict(index) if isinstance(index, Mapping) else {"": index}
        (first, location), *others = named.items()
        searcher = open_searcher(
            location, model=model, backend=backend, precision=precision, device=device, allow_pickle=allow_pickle,
            rerank=rerank, light=False,  # the service batches tokens: the light query encoder does not
        )  # fmt: skip
        name = str(search_model(searcher.index, model))
        opened = {first: searcher.index}
        for key, location in others:  # each checked against the first's model, as open_searcher checks it
            opened[key] = open_index(location)
            opened[key].check_encoder(name, searcher.encoder)
        return {
            "encoder": searcher.encoder,
            "model_name": name,
            "index": opened if isinstance(index, Mapping) else searcher.index,
            "cross_encoder": searcher.rerank,
        }
    import sbert
    from sbert.model_names import DEFAULT

    name = model or DEFAULT
    encoder = sbert.load(name, device=device, allow_pickle=allow_pickle, backend=backend, precision=precision)
    cross = load_reranker(rerank, device=device, allow_pickle=allow_pickle)
    return {"encoder": encoder, "model_name": name, "index": None, "cross_encoder": cross}


def serve(
    encoder,
    *,
    model_name: str,
    host: str = "127.0.0.1",
    port: int = 8080,
    sock: socket.socket | None = None,
    api_key: str | None = None,
    graceful_seconds: float = 30.0,
    access_log: bool = False,
    connections=None,
    **options: Any,
) -> None:
    """Run the service with uvicorn until SIGINT/SIGTERM; in-flight requests finish first.

    ``sock``: a socket from ``bind`` (else ``host:port`` is bound here). ``api_key``: else
    ``$SBERT_API_KEY`` (``auth.api_key_from``); without either, a server bound beyond loopback logs a
    warning. ``options`` go to ``create_app`` (index, limits, engine settings, cross_encoder, access: by
    default the ``Host`` must name ``host``). ``access_log`` logs a line per request (off: /metrics counts
    requests for less CPU). ``connections``: time-outs, bounds and the connection cap
    (``settings.Connections``).
    """
    from sbert.serve.access import is_loopback
    from sbert.serve.app import create_app
    from sbert.serve.auth import api_key_from
    from sbert.serve.settings import Access

    options.setdefault("access", Access(host=host))
    api_key = api_key_from(api_key)
    app = create_app(encoder, model_name=model_name, api_key=api_key, **options)
    sock = sock or bind(host, port)
    server = make_server(
        app, sock=sock, graceful_seconds=graceful_seconds, access_log=access_log, connections=connections
    )
    if api_key is None and not is_loopback(host):
        logging.getLogger("uvicorn.error").warning(
            "serving on %s without an API key: anyone who can reach this address can use the model%s; "
            "set --api-key or $%s to require one",
            host,
            " and search the index" if options.get("index") is not None else "",
            API_KEY_ENV,
        )
    server.run(sockets=[sock])
