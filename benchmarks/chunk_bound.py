"""What bounding the windows per document costs: chunked retrieval with ``--max-windows`` against no bound.

For each collection (SciFact test; openoffice-dups' newer part, split in time as benchmarks/retrieval.py
splits it), the default model indexes the documents in windows (256 tokens, 32 shared; maxp) once per
bound, each document keeping its first N windows, and the same test queries are scored dense and hybrid
(BM25 over the kept text, weighted 0.7: what ``sbert index build --chunk`` + ``sbert search`` do by
default). Beside each bound: the windows embedded and the documents it cut. The windows of a bound are the
first windows of no bound, so every index after the first looks its vectors up (``reusing_vectors``):
'index s' is the first build's alone, the unbounded one.

    flock /tmp/sbert-heavy.lock python -m benchmarks.chunk_bound [--collections scifact,openoffice-dups]
                                                                 [--bounds none,32,16,8,4,2] [--data DIR]
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch

import sbert
from benchmarks.lib import environment_lines, markdown_table, write_result
from benchmarks.lib.retrieval_data import test_part
from benchmarks.retrieval import Indexed
from sbert.evaluation.retrieval import RetrievalEvaluator
from sbert.evaluation.retrievers import IndexRetriever, RetrievalSettings
from sbert.windows import MAX_WINDOWS, Chunking

COLLECTIONS = ("scifact", "openoffice-dups")
BOUNDS = "none,32,16,8,4,2"
METRICS = ("ndcg@10", "mrr@10", "recall@100")


def bound_of(text: str) -> int | None:
    return None if text == "none" else int(text)


def collection_rows(name: str, args, model) -> list[list[object]]:
    collection = test_part(name, args)
    documents = list(collection.corpus.values())
    print(f"{name}: {len(collection.queries)} test queries, {len(documents)} documents", flush=True)
    texts = [d.joined(" ") for d in sorted(documents, key=lambda d: d.id)]
    rows, base = [], {}
    for bound in (bound_of(b) for b in args.bounds.split(",")):
        plan = Chunking(max_windows=bound).plan(model, texts, time_it=False)
        if bound is not None and not plan.cut:  # no document reaches the bound: the very windows of no bound
            rows.append(_row(bound, plan, base, base, None))
            continue
        settings = RetrievalSettings(chunk=True, hybrid=True, max_windows=bound)
        began = time.perf_counter()
        built = IndexRetriever(settings)
        built.index(model, documents)
        seconds = time.perf_counter() - began
        scores = {}
        for label, hybrid in (("dense", False), ("hybrid", True)):
            searching = RetrievalSettings(chunk=True, hybrid=hybrid, max_windows=bound)
            searcher = IndexRetriever(searching, index=built.built)
            found = RetrievalEvaluator(collection, name, retriever=Indexed(searcher, model, collection, seconds),
                                       latency_queries=0)(model)  # fmt: skip
            scores[label] = found
            print(f"  max_windows {bound}: {label} " + ", ".join(f"{m} {found[m]:.2f}" for m in METRICS), flush=True)
        if bound is None:
            base = scores
        rows.append(_row(bound, plan, scores, base, seconds))
    return rows


def _row(bound: int | None, plan, scores: dict, base: dict, seconds: float | None) -> list[object]:
    """One bound's row: its windows and cut documents, NDCG@10 (and the change against no bound) and MRR@10."""
    shown = "none" if bound is None else str(bound)
    row: list[object] = [f"{shown}{' (default)' if bound == MAX_WINDOWS else ''}", f"{plan.windows:,}", f"{plan.cut:,}"]
    for label in ("dense", "hybrid"):
        ndcg = scores[label]["ndcg@10"]
        delta = f" ({ndcg - base[label]['ndcg@10']:+.2f})" if bound is not None else ""
        row += [f"{ndcg:.2f}{delta}", f"{scores[label]['mrr@10']:.2f}"]
    if bound is None:
        return [*row, f"{seconds:.0f}"]
    return [*row, "(reused)" if seconds is not None else "(no document cut: the windows of none)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--bounds", default=BOUNDS, help="windows kept per document; 'none': every window")
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default="chunk_bound.md")
    args = parser.parse_args()
    if args.bounds.split(",")[0] != "none":
        raise SystemExit("--bounds must start with 'none': each bound is compared with it")
    began = time.perf_counter()
    model = sbert.load("default", device="cpu")
    header = ["max windows", "windows", "documents cut", "dense NDCG@10 (vs none)", "dense MRR@10",
              "hybrid NDCG@10 (vs none)", "hybrid MRR@10", "index s"]  # fmt: skip
    lines = ["# Chunked retrieval: windows kept per document (--max-windows) against every window", ""]
    with model.reusing_vectors():
        for name in args.collections.split(","):
            lines += [f"## {name}", "", *markdown_table(header, collection_rows(name, args, model)), ""]
    with open("/proc/loadavg") as handle:
        load = " ".join(handle.read().split()[:3])
    lines += [
        "Default model (all-MiniLM-L6-v2), windows of 256 tokens sharing 32, documents scored by their best "
        "window (maxp); hybrid: BM25 over each document's kept text, weighted fusion at alpha 0.7. A bound keeps "
        "a document's first windows. '(vs none)': the change in NDCG@10 against keeping every window. 'index s': "
        "embedding every window once; the bounded indexes reuse those vectors.",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; wall time "
        f"{time.perf_counter() - began:.0f} s; load average at the end {load}",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers", "bm25s")),
    ]
    write_result(args.out, lines)


if __name__ == "__main__":
    main()
