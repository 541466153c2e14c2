"""``sbert serve``: the HTTP embedding service, a thin shell over ``sbert.serve``."""

from __future__ import annotations

import click

from sbert.cli.common import MODEL_HELP, device_options, friendly_errors, load_model
from sbert.serve.settings import TORCH_WORKERS, EngineSettings, Limits

ENGINE, LIMITS = EngineSettings(), Limits()  # the defaults, shown in --help
POSITIVE = click.IntRange(min=1)


@click.command()
@click.option("--model", "-m", default="default", show_default=True, help=MODEL_HELP)
@device_options
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--index",
    "index_dir",
    type=click.Path(file_okay=False),
    help="Serve /search on it: an index folder, or postgresql://...[#table] (pgvector).",
)
@click.option("--rerank", "rerank_model", help="A cross-encoder folder: /search re-ranks on request.")
@click.option("--api-key", help="Require 'Authorization: Bearer KEY' (default: $SBERT_API_KEY; none = open).")
@click.option("--max-inputs", default=LIMITS.max_inputs, show_default=True, type=POSITIVE, help="Texts per request.")
@click.option("--max-chars", default=LIMITS.max_chars, show_default=True, type=POSITIVE, help="Per text.")
@click.option(
    "--max-body-mb", default=LIMITS.max_body_bytes / 2**20, show_default=True, type=click.FloatRange(min=0.001)
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
    api_key,
    max_inputs,
    max_chars,
    max_body_mb,
    access_log,
    **engine,  # EngineSettings' fields, by name
):
    """Serve embeddings over HTTP: OpenAI-compatible /v1/embeddings, /similarity, /search, /health, /metrics."""
    from sbert.serve import bind

    sock = bind(host, port)  # first: a busy port fails at once, not after loading torch and the model

    from sbert.serve import serve as run

    index = None
    if index_dir is not None:
        from sbert.search.retrieve import open_index

        index = open_index(index_dir)
    encoder = load_model(model, runtime, allow_pickle)
    if index is not None:
        index.check_model(model, encoder.dim)
        index.check_backend(encoder.runtime)  # int8 queries against float vectors degrade silently
    cross = None
    if rerank_model is not None:
        from sbert.cross_encoder import CrossEncoder

        cross = CrossEncoder.load(rerank_model, device=runtime.device, allow_pickle=allow_pickle)
    limits = Limits(max_inputs=max_inputs, max_chars=max_chars, max_body_bytes=int(max_body_mb * 2**20))
    run(
        encoder,
        model_name=model,
        host=host,
        port=port,
        sock=sock,
        index=index,
        api_key=api_key,
        limits=limits,
        engine=EngineSettings(**engine),
        cross_encoder=cross,
        access_log=access_log,
    )
