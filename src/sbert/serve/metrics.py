"""Prometheus metrics of the service: requests and latency per route, and the model's batches."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.responses import Response
from starlette.routing import BaseRoute, Match

UNMATCHED = "(unmatched)"  # the label of every path no route serves: a bounded set of labels
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    """The service's metrics, in a registry of their own (two apps in one process do not mix)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.requests = Counter("sbert_requests", "HTTP requests", ["endpoint", "status"], registry=registry)
        self.latency = Histogram(
            "sbert_request_seconds", "Request latency", ["endpoint"], registry=registry, buckets=LATENCY_BUCKETS
        )
        self.batch_texts = Histogram(
            "sbert_batch_texts", "Texts per model batch", registry=registry, buckets=BATCH_BUCKETS
        )
        self.batch_seconds = Histogram("sbert_batch_seconds", "Seconds per model batch", registry=registry)
        self.embedded = Counter("sbert_texts_embedded", "Texts embedded", registry=registry)

    def observe(self, route: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def on_batch(self, texts: int, seconds: float) -> None:
        """Count one model batch (the batcher calls it from its worker threads)."""
        self.batch_texts.observe(texts)
        self.batch_seconds.observe(seconds)
        self.embedded.inc(texts)

    def response(self) -> Response:
        """The Prometheus text exposition."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def route_label(routes: list[BaseRoute], scope: dict) -> str:
    """The path template of the route serving ``scope``, else UNMATCHED (never the raw path)."""
    for route in routes:
        if route.matches(scope)[0] != Match.NONE:
            return getattr(route, "path", UNMATCHED)
    return UNMATCHED
