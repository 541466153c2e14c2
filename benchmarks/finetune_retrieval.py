"""Fine-tuning for retrieval, as benchmarks/retrieval.py runs it (filled in below)."""

from __future__ import annotations


def fine_tune(name, collection, args):
    return None
