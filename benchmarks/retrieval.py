"""Document retrieval on real collections: BM25, the default model (truncated, chunked), hybrid, fine-tuned.

For each BEIR-layout collection under ``<data>/retrieval`` (SciFact: claims -> abstracts; openoffice-dups:
a new bug report -> the earlier report it duplicates), every row is one way of retrieving, scored on the
same test queries by ``sbert.evaluation.RetrievalEvaluator`` (NDCG@10, MRR@10, Recall@100, as
sentence-transformers' ``InformationRetrievalEvaluator`` computes them), with the time to index the
corpus and the latency of one query at a time (embedding + search, p50/p99 over ``--latency-queries``).
sentence-transformers' own evaluator runs beside the truncated default model, on the same documents.

Rows: BM25 (bm25s); the default model with documents truncated at its 256 tokens; chunked (windows of
256 tokens, 32 shared) scored by the best window (maxp) and by the mean window; hybrid (dense + BM25:
reciprocal rank fusion, and a weighted sum of min-max scores); the model fine-tuned for retrieval (in-batch
negatives with hard negatives mined by the default model; ``--skip-train`` leaves it out), alone and hybrid.

openoffice-dups has no train split: it is split in time (queries are numbered in the order they were
filed): the older part trains, the newer part is the test set every row of that collection is scored on.

    python -m benchmarks.retrieval [--collections scifact,openoffice-dups] [--skip-train] [--skip-st]
                                   [--latency-queries 200] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

import sbert
from benchmarks.lib import RESULTS, WORK, environment_lines, markdown_table, write_between_markers, write_result
from benchmarks.lib.retrieval_data import sample, test_part
from sbert.data.beir import RetrievalCollection
from sbert.evaluation.retrieval import RetrievalEvaluator, Retriever
from sbert.evaluation.retrievers import HybridRetriever, IndexRetriever, LexicalRetriever, RetrievalSettings

DOC = RESULTS / "retrieval-evidence.md"
BEGIN, END = "<!-- benchmarks/retrieval.py: begin -->", "<!-- benchmarks/retrieval.py: end -->"
METRICS = ("ndcg@10", "mrr@10", "recall@100")
COLLECTIONS = ("scifact", "openoffice-dups")


@dataclass
class Row:
    name: str
    metrics: dict[str, float]
    index_seconds: float
    reference: dict[str, float] = field(default_factory=dict)  # sentence-transformers' numbers beside it


class Indexed:
    """A retriever indexed once and shared by several rows; ``index`` is then a no-op, ``seconds`` its cost
    (``seconds`` given: the retriever is indexed already, at that cost)."""

    def __init__(self, retriever: Retriever, model, collection: RetrievalCollection, seconds: float | None = None):
        if seconds is None:
            began = time.perf_counter()
            retriever.index(model, list(collection.corpus.values()))
            seconds = time.perf_counter() - began
        self.retriever, self.seconds = retriever, seconds

    def index(self, model, documents, show_progress=None) -> None:
        pass

    def search(self, model, queries, k):
        return self.retriever.search(model, queries, k)


def evaluate(name: str, model, collection: RetrievalCollection, retriever, seconds: float, latency: int) -> Row:
    print(f"  {name} ...", flush=True)
    metrics = RetrievalEvaluator(collection, name, retriever=retriever, latency_queries=latency)(model)
    row = Row(name, metrics, seconds)
    print("    " + ", ".join(f"{m} {metrics[m]:.2f}" for m in METRICS), flush=True)
    return row


def st_reference(model_path: Path, collection: RetrievalCollection) -> dict[str, float]:
    """sentence-transformers' InformationRetrievalEvaluator on the same model, documents and queries (x 100)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    model = SentenceTransformer(str(model_path), device="cpu")
    queries = {q: collection.queries[q] for q in collection.queries if collection.relevant(q)}
    found = InformationRetrievalEvaluator(
        queries=queries,
        corpus=collection.document_texts(),
        relevant_docs={q: collection.relevant(q) for q in queries},
        mrr_at_k=[10],
        ndcg_at_k=[10],
        precision_recall_at_k=[1, 10, 100],
        map_at_k=[100],
        write_csv=False,
    )(model)
    return {m: 100 * found[f"cosine_{m}"] for m in METRICS}


def model_rows(
    label: str, model, collection: RetrievalCollection, args, lexical: Indexed, choices=None, keep=None
) -> list[Row]:
    """Dense (truncated), chunked (maxp, mean) and hybrid (rrf, weighted) rows for one model, each index
    built once. ``choices`` (chunk mode, fusion): only the truncated row and those (the fine-tuned model).
    ``keep``: a dict that receives each hybrid row's retriever, by row name."""
    dense = Indexed(IndexRetriever(), model, collection)
    rows = [evaluate(f"{label}, truncated at 256 tokens", model, collection, dense, dense.seconds, args.latency)]
    if choices is None and not args.skip_st:
        rows[0].reference = st_reference(model.path, collection)
    maxp = Indexed(IndexRetriever(RetrievalSettings(chunk=True, mode="maxp")), model, collection)
    chunked = {"maxp": maxp, "mean": Indexed(maxp.retriever.scored_by("mean"), model, collection, maxp.seconds)}
    modes = list(chunked) if choices is None else [choices[0]]
    scores = {}
    for mode in modes:
        rows.append(
            evaluate(f"{label}, chunked ({mode})", model, collection, chunked[mode], maxp.seconds, args.latency)
        )
        scores[mode] = rows[-1].metrics["ndcg@10"]
    best = max(scores, key=scores.__getitem__)
    sides = [(dense, "truncated"), (chunked[best], f"chunked {best}")] if choices is None else [(chunked[best], best)]
    for side, name in sides:
        for fusion in ("rrf", "weighted") if choices is None else [choices[1]]:
            hybrid = HybridRetriever(side, fusion=fusion, lexical=lexical)
            seconds = side.seconds + lexical.seconds
            rows.append(
                evaluate(f"{label}, {name} + BM25 ({fusion})", model, collection, hybrid, seconds, args.latency)
            )
            if keep is not None:
                keep[rows[-1].name] = (hybrid, seconds)
    return rows


def best_choices(rows: list[Row]) -> tuple[str, str]:
    """The chunk mode and the fusion that scored best (NDCG@10) for the default model."""

    def best(options: tuple[str, ...]) -> str:
        scored = {o: max((r.metrics["ndcg@10"] for r in rows if f"({o})" in r.name), default=-1) for o in options}
        return max(scored, key=scored.__getitem__)

    return best(("maxp", "mean")), best(("rrf", "weighted"))


def collection_rows(name: str, args, fine_tune: Callable[[str, RetrievalCollection], Path | None]) -> list[Row]:
    collection = sample(test_part(name, args), args.queries, args.documents)
    print(f"{name}: {len(collection.queries)} test queries, {len(collection.corpus)} documents", flush=True)
    bm25 = Indexed(LexicalRetriever(), None, collection)
    if args.reuse_default:  # BM25 and default-model rows of the last full run; the BM25 index is rebuilt
        rows = [row for row in saved_rows(name) if not row.name.startswith("fine-tuned")]
    else:
        rows = [evaluate("BM25 (bm25s)", None, collection, bm25, bm25.seconds, args.latency)]
        rows += model_rows("default model", sbert.load("default", device="cpu"), collection, args, bm25)
    tuned = None if args.skip_train else fine_tune(name, collection)
    if tuned is not None:
        model, hybrids = sbert.load(tuned, device="cpu"), {}
        rows += model_rows("fine-tuned", model, collection, args, bm25, best_choices(rows), hybrids)
        if name in args.rerank.split(","):
            rows.append(reranked_row(name, model, collection, args, *hybrids[rows[-1].name], rows[-1].name))
    return rows


def reranked_row(name: str, model, collection, args, first, seconds: float, first_name: str) -> Row:
    """The best first stage's top 100 re-scored by a cross-encoder trained for ``name`` (finetune_retrieval)."""
    from benchmarks.finetune_retrieval import RERANKER_TRAINING, train_reranker
    from sbert.cross_encoder import CrossEncoder
    from sbert.evaluation.retrievers import RerankRetriever

    folder = train_reranker(name, args)
    cross = CrossEncoder.load(folder, max_length=RERANKER_TRAINING["max_length"], device="cpu")
    retriever = RerankRetriever(first, cross, candidates=100)
    label = f"{first_name} + cross-encoder re-ranking the top 100"
    return evaluate(label, model, collection, retriever, seconds, min(args.latency, 50))


def saved_rows(name: str) -> list[Row]:
    """The rows the last run of this script measured for collection ``name``."""
    path = WORK / "retrieval" / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run this script on {name} without --reuse-default first")
    return [Row(**row) for row in json.loads(path.read_text())]


def table(rows: list[Row]) -> list[str]:
    header = [
        "retrieval",
        "NDCG@10",
        "MRR@10",
        "Recall@100",
        "ST NDCG@10 / MRR@10 / R@100",
        "index s",
        "query ms p50/p99",
    ]
    body = []
    for row in rows:
        m = row.metrics
        reference = " / ".join(f"{row.reference[k]:.2f}" for k in METRICS) if row.reference else "-"
        latency = f"{m['query_ms_p50']:.1f} / {m['query_ms_p99']:.1f}" if "query_ms_p50" in m else "-"
        body.append([row.name, *(f"{m[k]:.2f}" for k in METRICS), reference, f"{row.index_seconds:.1f}", latency])
    return markdown_table(header, body)


def provenance(name: str, measured: list[str], args) -> list[str]:
    """Which rows of collection ``name`` this run measured and which it took from an earlier run."""
    if name not in measured:
        return [f"(All rows from an earlier run of this script, kept in benchmarks/.work/retrieval/{name}.json.)"]
    if args.reuse_default:
        return [
            "(BM25 and default-model rows from an earlier run of this script (`--reuse-default`); "
            "fine-tuned rows from this run.)"
        ]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", default=",".join(COLLECTIONS), help="measured; others: last run's rows")
    parser.add_argument("--latency-queries", dest="latency", type=int, default=200)
    parser.add_argument("--skip-train", action="store_true", help="leave out the fine-tuned rows")
    parser.add_argument("--skip-st", action="store_true", help="leave out sentence-transformers' numbers")
    parser.add_argument(
        "--reuse-default",
        action="store_true",
        help="take the BM25 and default-model rows from the last run (benchmarks/.work); measure the fine-tuned ones",
    )
    parser.add_argument("--train-steps", type=int, default=None, help="quick runs: cap the fine-tuning steps")
    parser.add_argument("--queries", type=int, default=None, help="quick runs: only the first N test queries")
    parser.add_argument("--documents", type=int, default=None, help="quick runs: relevant documents + N others")
    parser.add_argument(
        "--rerank", default="scifact", help="collections given a cross-encoder re-ranking row ('' for none)"
    )
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default="retrieval.md")
    args = parser.parse_args()

    from benchmarks.finetune_retrieval import fine_tune

    quick = any(value is not None for value in (args.queries, args.documents, args.train_steps))
    began = time.perf_counter()
    lines, measured = ["# Document retrieval: measured", ""], args.collections.split(",")
    for name in dict.fromkeys([*COLLECTIONS, *measured]):
        if name in measured:
            rows = collection_rows(name, args, lambda n, c: fine_tune(n, c, args))
            (WORK / "retrieval").mkdir(parents=True, exist_ok=True)
            if not quick:  # a sample's rows must not stand for the collection's in later runs
                (WORK / "retrieval" / f"{name}.json").write_text(json.dumps([r.__dict__ for r in rows], indent=1))
        elif (WORK / "retrieval" / f"{name}.json").is_file():
            rows = saved_rows(name)
        else:
            continue
        lines += [f"## {name}", "", *table(rows), "", *provenance(name, measured, args), ""]
    lines += [
        f"Wall time of this run {time.perf_counter() - began:.0f} s. 'index s': embedding (or BM25-indexing) "
        "the corpus; "
        "a hybrid row's is both sides'. 'query ms': one query at a time, embedding and search, over the "
        f"first {args.latency} test queries. All models run on the CPU, torch fp32.",
        "",
        *environment_lines(
            torch.get_num_threads(), ("sbert", "torch", "transformers", "sentence-transformers", "bm25s")
        ),
    ]
    write_result(args.out, lines)
    if not quick:
        write_between_markers(DOC, BEGIN, END, lines[2:])


if __name__ == "__main__":
    main()
