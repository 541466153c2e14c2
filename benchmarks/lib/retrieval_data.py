"""The retrieval collections as every retrieval benchmark reads them: SciFact, and openoffice-dups split in
time (its older 80% of queries train, its newer 20% are the test part), and samples of them for quick runs."""

from __future__ import annotations

import random
from pathlib import Path

from benchmarks.lib.paths import WORK
from sbert.data.beir import RetrievalCollection, read_beir
from sbert.data.paths import data_dir


def split_collection(name: str, data: str | None) -> Path:
    """The folder whose ``train`` split trains and whose ``test`` split is scored (openoffice-dups: cut in time)."""
    folder = data_dir(data) / "retrieval" / name
    if name != "openoffice-dups":
        return folder
    from sbert.data.time_split import split_by_time

    out = WORK / "retrieval" / "openoffice-dups-time-split"
    if not (out / "split.json").is_file():
        info = split_by_time(folder, out, split="test", train_fraction=0.8)
        print(f"openoffice-dups split in time at {info.cutoff}: {info.train_queries} train / {info.test_queries} test")
    return out


def test_part(name: str, args) -> RetrievalCollection:
    """The collection's test split; for openoffice-dups, the newer part of a split in time."""
    return read_beir(split_collection(name, args.data), "test")


def sample(collection: RetrievalCollection, queries: int | None, documents: int | None) -> RetrievalCollection:
    """For quick runs: the first ``queries`` judged queries; their relevant documents and ``documents`` others."""
    if queries is None and documents is None:
        return collection
    kept = {q: t for q, t in list(collection.queries.items())[:queries] if collection.relevant(q)}
    relevant = {d for q in kept for d in collection.relevant(q)}
    others = sorted(set(collection.corpus) - relevant)
    chosen = relevant | set(random.Random(0).sample(others, min(documents or len(others), len(others))))
    corpus = {d: doc for d, doc in collection.corpus.items() if d in chosen}
    qrels = {q: collection.qrels[q] for q in kept}
    return RetrievalCollection(collection.name, collection.split, corpus, kept, qrels)
