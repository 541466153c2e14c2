"""The embedding service: ``create_app`` (FastAPI) and ``DynamicBatcher``; ``sbert serve`` runs it."""

from __future__ import annotations

import os

API_KEY_ENV = "SBERT_API_KEY"


def serve(
    encoder,
    *,
    model_name: str,
    host: str = "127.0.0.1",
    port: int = 8080,
    index=None,
    api_key: str | None = None,
    limits=None,
    max_batch_texts: int = 256,
    max_wait_ms: float = 5.0,
    encode_batch_size: int = 32,
    max_tokens: int | None = None,
    cross_encoder=None,
    graceful_seconds: float = 30.0,
) -> None:
    """Run the service with uvicorn until SIGINT/SIGTERM; in-flight requests finish first."""
    import uvicorn

    from sbert.serve.app import create_app

    app = create_app(
        encoder,
        model_name=model_name,
        index=index,
        api_key=api_key or os.environ.get(API_KEY_ENV) or None,
        limits=limits,
        max_batch_texts=max_batch_texts,
        max_wait_ms=max_wait_ms,
        encode_batch_size=encode_batch_size,
        max_tokens=max_tokens,
        cross_encoder=cross_encoder,
    )
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=graceful_seconds)
