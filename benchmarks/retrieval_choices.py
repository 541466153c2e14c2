"""The choices of long-document and hybrid search, measured on SciFact's test queries with the default model.

Rows: documents truncated at the model's window; chunked (``sbert.windows``: windows of the model's
254 tokens, 32 shared) scored by the best window (maxp) and by the mean window vector (mean); BM25
(``sbert.search.lexical``) over whole documents and over the windows (a document scores its best
window's, as an index of documents does); hybrid (``sbert.search.fusion``) of the better chunked mode
with BM25, by reciprocal rank fusion and by weighted sums of min-max scores. Each scored by NDCG@10,
MRR@10 and recall@100 (``sbert.evaluation.retrieval``), x 100.

By default the corpus is every document judged relevant to a test query plus ``--others`` others drawn
at random (seed 0), to keep the run short on a shared CPU; ``--others 0`` takes the whole corpus.

    python -m benchmarks.retrieval_choices [--others 2000] [--window 254] [--overlap 32] [--data DIR]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from benchmarks.lib import environment_lines, markdown_table, write_result


def _corpus(folder: Path, others: int):
    from sbert.data.beir import read_beir

    collection = read_beir(folder, "test")
    relevant = {d for q in collection.queries for d in collection.relevant(q)}
    rest = sorted(set(collection.corpus) - relevant)
    chosen = rest if others <= 0 else random.Random(0).sample(rest, min(others, len(rest)))
    keep = relevant | set(chosen)
    ids = [d for d in collection.corpus if d in keep]
    return collection, ids, [collection.corpus[d].joined() for d in ids]


def _rankings(found, ids, query_ids) -> dict[str, list[str]]:
    return {q: [ids[int(i)] for i in row if i >= 0] for q, row in zip(query_ids, found.indices, strict=True)}


def _document_top(hits):
    from sbert.search.exact import TopK

    scores = np.array([[h.score for h in row] for row in hits], dtype=np.float32)
    return TopK(scores, np.array([[int(h.id) for h in row] for row in hits], dtype=np.int64))


def _window_bm25(windows, texts_of_windows, queries, n_docs: int, k: int):
    """BM25 over the windows; a document scores its best window's."""
    from sbert.search import ranking
    from sbert.search.exact import TopK
    from sbert.search.lexical import BM25

    bm25 = BM25.build(texts_of_windows)
    scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    rows = np.full((len(queries), k), -1, dtype=np.int64)
    for n, query in enumerate(queries):
        per_doc = np.zeros(n_docs, dtype=np.float32)
        np.maximum.at(per_doc, windows.doc, bm25.scores(query))
        found = np.flatnonzero(per_doc > 0)
        s, r = ranking.top(per_doc[found][None], found[None], k)
        scores[n, : r.shape[1]], rows[n, : r.shape[1]] = s[0], r[0]
    return TopK(scores, rows)


def main() -> None:  # long: one straight measurement, step by step
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--others", type=int, default=2000)
    parser.add_argument("--window", type=int, default=None)
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--data", type=Path, default=None)
    args = parser.parse_args()

    import sbert
    from sbert.data.paths import data_dir
    from sbert.evaluation.retrieval import retrieval_metrics
    from sbert.search.exact import semantic_search
    from sbert.search.fusion import fuse
    from sbert.search.lexical import BM25
    from sbert.windows import encode_documents, rank_documents

    collection, ids, texts = _corpus((args.data or data_dir()) / "retrieval" / "scifact", args.others)
    query_ids = list(collection.queries)
    queries = [collection.queries[q] for q in query_ids]
    relevant = {q: collection.relevant(q) for q in query_ids}
    k = 100
    model = sbert.load("default", device="cpu")
    rows, seconds = {}, {}

    def score(name: str, found) -> None:
        rows[name] = retrieval_metrics(
            _rankings(found, ids, query_ids), relevant, {"ndcg": [10], "mrr": [10], "recall": [100]}
        )
        print(name, {key: round(100 * value, 2) for key, value in rows[name].items()}, flush=True)

    query_vectors = model.encode(queries)
    start = time.perf_counter()
    whole = model.encode(texts, on_truncation="ignore")
    seconds["truncated"] = time.perf_counter() - start
    score("truncated at the window", semantic_search(query_vectors, whole, k))
    start = time.perf_counter()
    windows = encode_documents(model, texts, window=args.window, overlap=args.overlap)
    seconds["chunked"] = time.perf_counter() - start
    chunked = {}
    for mode in ("maxp", "mean"):
        chunked[mode] = _document_top(rank_documents(query_vectors, windows, k, mode))
        score(f"chunked, {mode}", chunked[mode])
    best = max(("maxp", "mean"), key=lambda m: rows[f"chunked, {m}"]["ndcg@10"])
    lexical = BM25.build(texts).search(queries, k)
    score("BM25, whole documents", lexical)
    lexical_windows = _window_bm25(windows, windows.passages, queries, len(ids), k)
    score("BM25, windows (best window)", lexical_windows)
    for side, bm25 in (("whole", lexical), ("windows", lexical_windows)):
        score(f"hybrid {best} + BM25 {side}, rrf", fuse(chunked[best], bm25, k, "rrf"))
        for alpha in (0.3, 0.5, 0.7):
            score(
                f"hybrid {best} + BM25 {side}, weighted alpha {alpha}", fuse(chunked[best], bm25, k, "weighted", alpha)
            )

    long_share = float(np.mean(np.bincount(windows.doc) > 1))
    header = ["rows", "NDCG@10", "MRR@10", "recall@100"]
    table = [
        [name, *(f"{100 * m[key]:.2f}" for key in ("ndcg@10", "mrr@10", "recall@100"))] for name, m in rows.items()
    ]
    import torch

    lines = [
        "# Long documents and hybrid search: the choices",
        "",
        f"SciFact test: {len(query_ids)} queries; corpus: {len(ids):,} documents (every relevant one + "
        f"{'all others' if args.others <= 0 else f'{args.others:,} others at random'}); {len(windows.doc):,} "
        f"windows of at most {args.window or 254} tokens, {args.overlap} shared; {100 * long_share:.1f}% of "
        "documents take more than one window. Metrics x 100.",
        "",
        *markdown_table(header, table),
        "",
        f"Embedding the corpus: truncated {seconds['truncated']:.0f} s, chunked {seconds['chunked']:.0f} s "
        "(2 cores shared with other work).",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers", "bm25s")),
    ]
    write_result("retrieval_choices.md", lines)


if __name__ == "__main__":
    main()
