"""The embedding service: ``create_app`` (FastAPI) and ``DynamicBatcher``; ``sbert serve`` runs it."""

from __future__ import annotations

import os
from typing import Any

API_KEY_ENV = "SBERT_API_KEY"


def serve(
    encoder,
    *,
    model_name: str,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_key: str | None = None,
    graceful_seconds: float = 30.0,
    access_log: bool = False,
    **options: Any,
) -> None:
    """Run the service with uvicorn until SIGINT/SIGTERM; in-flight requests finish first.

    ``options`` go to ``create_app`` (index, limits, batching, cross_encoder, packing, workers).
    ``access_log`` logs a line per request (off: /metrics counts requests for less CPU).
    """
    import uvicorn

    from sbert.serve.app import create_app

    app = create_app(encoder, model_name=model_name, api_key=api_key or os.environ.get(API_KEY_ENV) or None, **options)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="info",
        access_log=access_log,
        timeout_graceful_shutdown=graceful_seconds,
    )
