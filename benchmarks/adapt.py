"""Label-free adaptation (``sbert adapt``) on collections whose queries and judgments it never reads.

For each BEIR collection (SciFact; openoffice-dups split in time: the test part is the newest 20% of
reports), every row is scored on the same test queries by ``sbert.evaluation.RetrievalEvaluator``
(NDCG@10, MRR@10, Recall@100): BM25; the default model (dense, and dense + BM25 weighted fusion); and the
default model adapted by each ``--methods`` entry on the collection's documents only (``sbert adapt MODEL
--corpus <collection folder> --method M``, run as a command so that its wall time and peak memory are its
own), dense and hybrid. Adapted models are cached under ``benchmarks/.work/adapt`` by (collection,
method, steps, teacher) and reused.

Choosing without fooling ourselves: the table names, for each collection, the method that the OTHER
collection's test queries would have chosen, and its score here: that is the figure a user with a new
collection can expect.

    python benchmarks/adapt.py [--collections scifact,openoffice-dups] [--methods title,crop,title+crop]
                               [--steps 150] [--teacher all-mpnet-base-v2] [--queries N --documents N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from common import WORK, environment_lines, markdown_table, write_between_markers, write_result
from retrieval import sample, test_part

import sbert
from sbert.data.beir import RetrievalCollection
from sbert.data.paths import data_dir
from sbert.evaluation.retrieval import RetrievalEvaluator

DOC = Path(__file__).resolve().parent.parent / "docs" / "retrieval.md"
BEGIN, END = "<!-- benchmarks/adapt.py: begin -->", "<!-- benchmarks/adapt.py: end -->"
METRICS = ("ndcg@10", "mrr@10", "recall@100")
HEADLINE = {"scifact": "ndcg@10", "openoffice-dups": "mrr@10"}
COLLECTIONS = ("scifact", "openoffice-dups")


@dataclass
class Row:
    name: str
    metrics: dict[str, float]
    method: str = ""
    adapt: dict = field(default_factory=dict)  # seconds, peak_rss_gib, steps of the adapt run


def retrievers():
    """Dense, BM25 and weighted dense + BM25, as ``sbert eval --retrieval`` builds them."""
    from sbert.evaluation.retrieval import DenseRetriever
    from sbert.evaluation.retrievers import HybridRetriever

    return {
        "dense": lambda lexical: DenseRetriever(),
        "hybrid": lambda lexical: HybridRetriever(DenseRetriever(), fusion="weighted", lexical=lexical),
        "bm25": lambda lexical: lexical,
    }


def score(name: str, model, collection: RetrievalCollection, retriever) -> dict[str, float]:
    print(f"  {name} ...", flush=True)
    metrics = RetrievalEvaluator(collection, name, retriever=retriever)(model)
    print("    " + ", ".join(f"{m} {metrics[m]:.2f}" for m in METRICS), flush=True)
    return {m: metrics[m] for m in METRICS}


def adapted(collection: str, method: str, args) -> tuple[Path, dict]:
    """The default model adapted to ``collection``'s documents by ``method`` (cached), and its run's cost."""
    teacher = args.teacher if method.startswith("distill") else None
    key = f"{method}-{args.steps}" + (f"-{Path(teacher).name}" if teacher else "")
    out = WORK / "adapt" / collection / key
    record = out.with_name(key + ".json")
    if record.is_file() and out.is_dir():
        return out, json.loads(record.read_text())
    corpus = data_dir(args.data) / "retrieval" / collection
    command = [sys.executable, "-m", "sbert", "adapt", "default", "--corpus", str(corpus), "--out", str(out)]
    command += ["--method", method, "--steps", str(args.steps), "--no-progress"]
    command += ["--teacher", teacher] if teacher else []
    command += ["--resume"] if (out.with_name(out.name + ".train") / "checkpoint.pt").is_file() else []  # a killed run
    print(f"  adapting: {' '.join(command[2:])}", flush=True)
    began, load = time.perf_counter(), os.getloadavg()[0]
    subprocess.run(command, check=True)
    cost = {
        "seconds": round(time.perf_counter() - began, 1),
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20, 2),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "steps": args.steps,
    }
    record.write_text(json.dumps(cost))
    return out, cost


def collection_rows(name: str, args) -> list[Row]:
    from sbert.evaluation.retrievers import LexicalRetriever

    collection = sample(test_part(name, args), args.queries, args.documents)
    print(f"{name}: {len(collection.queries)} test queries, {len(collection.corpus)} documents", flush=True)
    lexical = LexicalRetriever()
    lexical.index(None, list(collection.corpus.values()))
    make = retrievers()
    rows = [Row("BM25 (bm25s)", score("bm25", None, collection, make["bm25"](lexical)))]
    default = sbert.load("default", device="cpu")
    for kind in ("dense", "hybrid"):
        rows.append(Row(f"default model, {kind}", score(kind, default, collection, make[kind](lexical))))
    for method in args.methods.split(","):
        folder, cost = adapted(name, method, args)
        model = sbert.load(str(folder), device="cpu")
        for kind in ("dense", "hybrid"):
            metrics = score(f"{method} {kind}", model, collection, make[kind](lexical))
            rows.append(Row(f"adapt --method {method}, {kind}", metrics, method, cost))
    return rows


def transfer_lines(results: dict[str, list[Row]]) -> list[str]:
    """For each collection: the method the other collection's test queries choose, and its score here."""
    lines = []
    for here, rows in results.items():
        for there, other in results.items():
            if there == here:
                continue
            metric = HEADLINE[there]
            dense = [r for r in other if r.method and r.name.endswith("dense")]
            if not dense:
                continue
            chosen = max(dense, key=lambda r: r.metrics[metric]).method
            mine = next(r for r in rows if r.method == chosen and r.name.endswith("dense"))
            base = next(r for r in rows if r.name == "default model, dense")
            gain = mine.metrics[HEADLINE[here]] - base.metrics[HEADLINE[here]]
            lines.append(
                f"- chosen on {there} ({metric}): `{chosen}`; on {here} it scores {HEADLINE[here]} "
                f"{mine.metrics[HEADLINE[here]]:.2f} ({gain:+.2f} over the default model)"
            )
    return lines


def table(rows: list[Row]) -> list[str]:
    header = ["retrieval", "NDCG@10", "MRR@10", "Recall@100", "adapt wall s", "adapt peak GiB", "load avg"]
    body = []
    for row in rows:
        cost = row.adapt
        extra = (
            [f"{cost['seconds']:.0f}", f"{cost['peak_rss_gib']:.1f}", f"{cost['load_before']}/{cost['load_after']}"]
            if cost
            else ["-", "-", "-"]
        )
        body.append([row.name, *(f"{row.metrics[k]:.2f}" for k in METRICS), *extra])
    return markdown_table(header, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--methods", default="title,crop,title+crop")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--teacher", default="all-mpnet-base-v2")
    parser.add_argument("--queries", type=int, default=None, help="quick runs: only the first N test queries")
    parser.add_argument("--documents", type=int, default=None, help="quick runs: relevant documents + N others")
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default="adapt.md")
    args = parser.parse_args()
    quick = args.queries is not None or args.documents is not None
    began = time.perf_counter()
    results = {name: collection_rows(name, args) for name in args.collections.split(",")}
    lines = ["# Label-free adaptation: measured", ""]
    for name, rows in results.items():
        lines += [f"## {name}", "", *table(rows), ""]
    lines += ["## Chosen on one collection, reported on the other", "", *transfer_lines(results), ""]
    lines += [
        f"Wall time of this run {time.perf_counter() - began:.0f} s. Adapted on the collection's documents only "
        f"(no queries, no judgments), {args.steps} steps at batch 32; 'load avg' is the 1-minute load before/after "
        "the adapt run (other jobs share the 2 cores).",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers", "bm25s")),
    ]
    write_result(args.out, lines)
    if not quick:
        write_between_markers(DOC, BEGIN, END, lines[2:])


if __name__ == "__main__":
    main()
