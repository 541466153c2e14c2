"""``sbert serve``: the HTTP embedding service, a thin shell over ``sbert.serve``."""

from __future__ import annotations

import click

from sbert.adapter_folder import DEFAULT_MAX_ADAPTERS
from sbert.cli.common import MODEL_HELP, device_options, friendly_errors
from sbert.serve.settings import FIELD_VALUES, TORCH_WORKERS, Access, Connections, EngineSettings, Limits

ENGINE, LIMITS, CONNECTIONS = EngineSettings(), Limits(), Connections()  # the defaults, shown in --help
POSITIVE = click.IntRange(min=1)
SECONDS = click.FloatRange(min=0.1)


@click.command()
@click.option(
    "--model",
    "-m",
    default=None,
    help=MODEL_HELP + " With --index it must be the index's model [default: the index's model, else default].",
)
@device_options
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--index",
    "index_dir",
    multiple=True,
    metavar="[NAME=]INDEX",
    help="Serve /search on it: an index folder, or postgresql://...[#table] (pgvector). Repeat as NAME=INDEX "
    "for several ('index' in /search names one), all of one model, or each of its own --adapter.",
)
@click.option("--rerank", "rerank_model", help="A cross-encoder folder: /search re-ranks on request.")
@click.option(
    "--adapter",
    "adapters",
    multiple=True,
    metavar="NAME=FOLDER",
    help="Serve a LoRA adapter over --model as NAME ('model' in /v1/embeddings; /v1/models lists them); "
    "repeat for more: one base in memory, each adapter beside it, requests of different adapters never in one "
    "batch. With --index, /search embeds with the index's own adapter.",
)
@click.option(
    "--max-adapters",
    default=DEFAULT_MAX_ADAPTERS,
    show_default=True,
    type=POSITIVE,
    help="Refuse more --adapter than this (each holds its low-rank weights in memory).",
)
@click.option(
    "--api-key",
    help="Require 'Authorization: Bearer KEY'; KEY: printable ASCII, no spaces, not empty (default: "
    "$SBERT_API_KEY; neither: open to all, with a warning where --host is not a loopback address).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="Also accept requests whose Host header names this (repeatable; '*': any). By default the Host must "
    "name the bound address (loopback: localhost or any loopback address; 0.0.0.0/::: localhost or any IP).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    help="Let web pages from this origin (e.g. http://localhost:3000; repeatable; '*': any) call the API; "
    "other origins' requests are refused (403).",
)
@click.option(
    "--max-inputs",
    default=LIMITS.max_inputs,
    show_default=True,
    type=POSITIVE,
    help=f"Texts per request; a body may hold twice this + {FIELD_VALUES} JSON values (counted before parsing).",
)
@click.option("--max-chars", default=LIMITS.max_chars, show_default=True, type=POSITIVE, help="Per text.")
@click.option(
    "--max-body-mb",
    default=LIMITS.max_body_bytes / 2**20,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Largest request body (else 413).",
)
@click.option(
    "--max-search-hits",
    default=LIMITS.max_search_hits,
    show_default=True,
    type=POSITIVE,
    help="/search: queries x k (x candidates when re-ranking or hybrid) per request.",
)
@click.option(
    "--max-similarity-cells",
    default=LIMITS.max_similarity_cells,
    show_default=True,
    type=POSITIVE,
    help="/similarity: scores per request (len(a) x len(b)).",
)
@click.option(
    "--max-response-mb",
    default=LIMITS.max_response_bytes / 2**20,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Largest /search answer (with its texts).",
)
@click.option(
    "--header-timeout",
    default=CONNECTIONS.header_timeout,
    show_default=True,
    type=SECONDS,
    help="Seconds a request's headers may take to arrive (else 408, connection closed).",
)
@click.option(
    "--max-header-kb",
    default=CONNECTIONS.max_header_bytes / 2**10,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Largest request line and headers, in KiB (else 431, connection closed).",
)
@click.option(
    "--read-timeout",
    default=CONNECTIONS.read_timeout,
    show_default=True,
    type=SECONDS,
    help="Longest pause, in seconds, while a request body arrives (else 408, connection closed).",
)
@click.option(
    "--body-timeout",
    default=CONNECTIONS.body_timeout,
    show_default=True,
    type=SECONDS,
    help="Seconds a whole request body may take to arrive after its headers (else 408, connection closed).",
)
@click.option(
    "--keep-alive", default=CONNECTIONS.keep_alive, show_default=True, type=SECONDS, help="Idle connection seconds."
)
@click.option(
    "--max-connections",
    default=CONNECTIONS.max_connections,
    show_default=True,
    type=POSITIVE,
    help="Open connections (or requests in flight) beyond which requests get 503.",
)
@click.option(
    "--max-batch",
    "max_batch_texts",
    default=ENGINE.max_batch_texts,
    show_default=True,
    type=POSITIVE,
    help="Texts per model batch.",
)
@click.option(
    "--max-wait-ms", default=ENGINE.max_wait_ms, show_default=True, type=click.FloatRange(min=0), help="Batch wait."
)
@click.option(
    "--batch-size",
    "encode_batch_size",
    default=ENGINE.encode_batch_size,
    show_default=True,
    type=POSITIVE,
    help="Model forward batch.",
)
@click.option("--max-tokens", type=POSITIVE, help="Cap forward passes at this many tokens.")
@click.option(
    "--workers",
    type=POSITIVE,
    help="Batches run side by side, torch's threads divided among them "
    f"(default: {TORCH_WORKERS} on torch, 1 on onnx).",
)
@click.option("--access-log/--no-access-log", default=False, show_default=True, help="A log line per request.")
@click.option(
    "--packing/--no-packing",
    default=None,
    help="Run merged batches unpadded (default: on for BERT-family models on the torch backend).",
)
@friendly_errors
def serve(
    model,
    runtime,
    allow_pickle,
    host,
    port,
    index_dir,
    rerank_model,
    adapters,
    max_adapters,
    api_key,
    allowed_hosts,
    cors_origins,
    max_inputs,
    max_chars,
    max_body_mb,
    max_search_hits,
    max_similarity_cells,
    max_response_mb,
    header_timeout,
    max_header_kb,
    read_timeout,
    body_timeout,
    keep_alive,
    max_connections,
    access_log,
    **engine,  # EngineSettings' fields, by name
):  # long: one parameter per option
    """Serve embeddings over HTTP: OpenAI-compatible /v1/embeddings, /similarity, /search, /health, /metrics.

    With --index, the model is the index's own (as `sbert search` embeds its queries)."""
    from sbert.serve import bind
    from sbert.serve.auth import api_key_from, check_api_key

    api_key = api_key_from(api_key)
    check_api_key(api_key)  # a key no client can send fails here, before the port and the model
    sock = bind(host, port)  # first: a busy port fails at once, not after loading torch and the model

    from sbert.serve import open_service
    from sbert.serve import serve as run
    from sbert.serve.adapters import named_indexes

    index_dir = named_indexes(index_dir)
    if adapters:  # one base in memory, each adapter beside it (sbert.serve.adapters)
        served = _adapters(model, index_dir, rerank_model, adapters, max_adapters, runtime, allow_pickle)
    else:
        served = open_service(
            model, index=index_dir, rerank=rerank_model, backend=runtime.backend, precision=runtime.precision,
            device=runtime.device, allow_pickle=allow_pickle,
        )  # fmt: skip
    limits = Limits(
        max_inputs=max_inputs,
        max_chars=max_chars,
        max_body_bytes=int(max_body_mb * 2**20),
        max_search_hits=max_search_hits,
        max_similarity_cells=max_similarity_cells,
        max_response_bytes=int(max_response_mb * 2**20),
    )
    run(
        **served,
        host=host,
        port=port,
        sock=sock,
        api_key=api_key,
        limits=limits,
        engine=EngineSettings(**engine),
        access_log=access_log,
        access=Access(host=host, allowed_hosts=allowed_hosts, cors_origins=cors_origins),
        connections=Connections(
            header_timeout=header_timeout,
            read_timeout=read_timeout,
            keep_alive=keep_alive,
            max_connections=max_connections,
            body_timeout=body_timeout,
            max_header_bytes=int(max_header_kb * 2**10),
        ),
    )


def _adapters(model, index_dir, rerank_model, pairs, max_adapters: int, runtime, allow_pickle: bool) -> dict:
    """``--adapter``'s set-up (``sbert.serve.adapters.open_adapter_service``), and a line on the memory held."""
    from sbert.serve.adapters import named_folders, open_adapter_service

    if runtime.backend != "torch":
        raise click.UsageError("--adapter serves adapters over one base on the torch backend (leave out --backend)")
    served = open_adapter_service(
        model, named_folders(pairs), index=index_dir, rerank=rerank_model, max_adapters=max_adapters,
        device=runtime.device, allow_pickle=allow_pickle,
    )  # fmt: skip
    size, count = served["adapters"].memory(), len(served["adapters"].names)
    held = f"{size['base'] / 2**20:.1f} MB of weights, {count} adapter{'' if count == 1 else 's'} beside it"
    click.echo(f"serving {served['model_name']}: {held}: {sum(size['adapters'].values()) / 2**20:.2f} MB", err=True)
    return served
