"""Many processes on one machine: ``encode_to_shards`` streams texts to N worker processes and writes a
resumable folder of shards (``.npy`` vectors and Parquet ids/texts/vectors, described by ``manifest.json``).

Nothing heavy loads at ``import sbert.parallel``; the names below load on first use.
"""

from __future__ import annotations

import importlib

_NAMES = {
    "encode_to_shards": "sbert.parallel.processes",
    "ShardRun": "sbert.parallel.processes",
    "WorkerDiedError": "sbert.parallel.processes",
    "EncodeStoppedError": "sbert.parallel.processes",
    "ShardFolder": "sbert.parallel.shards",
    "ShardFolderError": "sbert.parallel.shards",
    "ShardFolderLockedError": "sbert.parallel.shards",
    "iter_vectors": "sbert.parallel.shards",
    "load_vectors": "sbert.parallel.shards",
    "load_table": "sbert.parallel.shards",
}


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'sbert.parallel' has no attribute {name!r}")


__all__ = sorted(_NAMES)
