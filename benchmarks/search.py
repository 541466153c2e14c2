"""Search at scale: exact, approximate (HNSW) and quantised search over 1,000,000 vectors.

The corpus: every distinct sentence in the shared data (STSb, SICK, SNLI, STS12, SentEval tasks)
embedded with all-MiniLM-L6-v2, less 1,000 held out as queries, topped up to --size rows with
noise-perturbed copies of randomly chosen real rows: normalise(x + sigma * g), g ~ N(0, I).
Each method runs through sbert.search.index.folder.VectorIndex (build, then search one query at a time);
recall@10 is measured against exact float32 search over the same index.

Part 1 picks the ANN library: FAISS, hnswlib and usearch HNSW graphs with the same M and
efConstruction on the first --library-size rows, same threads, same queries.

    python -m benchmarks.search [--size 1000000] [--library-size 200000] [--queries 1000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.lib import WORK, environment_lines, markdown_table, write_result
from benchmarks.lib.sentences import embedded
from sbert.data.paths import data_dir
from sbert.search.index.folder import VectorIndex

SOURCES = ("stsb", "sick", "snli", "sts12", "senteval")


def make_corpus(emb: np.ndarray, size: int, n_queries: int, sigma: float, seed: int):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(emb))
    queries, real = emb[order[:n_queries]], emb[order[n_queries:]]
    extra = size - len(real)
    parts = [real]
    for start in range(0, max(extra, 0), 100_000):
        n = min(100_000, extra - start)
        src = real[rng.integers(0, len(real), n)]
        noisy = src + sigma * rng.standard_normal(src.shape, dtype=np.float32)
        parts.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
    corpus = np.ascontiguousarray(np.vstack(parts)[:size], dtype=np.float32)
    return corpus, np.ascontiguousarray(queries, dtype=np.float32), len(real)


def latencies(search_one, queries: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Rows found for each query (searched one at a time), and p50 / p99 latency in ms."""
    search_one(queries[:1])  # warm-up
    rows, times = [], []
    for q in queries:
        began = time.perf_counter()
        rows.append(search_one(q[None]))
        times.append(time.perf_counter() - began)
    ms = np.array(times) * 1e3
    return np.vstack(rows), float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def recall(found, exact: np.ndarray) -> float:
    """Recall@k: the share of each row of ``exact`` (the true k neighbours) found in ``found``'s row, averaged."""
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, exact, strict=True)]))


def folder_bytes(path: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in path.glob(pattern))


def compare_libraries(corpus: np.ndarray, queries: np.ndarray, m: int, efc: int, threads: int) -> list[str]:
    import faiss
    import hnswlib
    from usearch.index import Index as UsearchIndex

    exact = np.argsort(-(queries @ corpus.T), axis=1)[:, :10]
    n, d = corpus.shape
    rows = []

    def run(name, build, set_ef, search_one):
        began = time.perf_counter()
        index = build()
        seconds = time.perf_counter() - began
        for ef in (32, 64, 128):
            set_ef(index, ef)
            found, p50, p99 = latencies(lambda q, index=index: search_one(index, q), queries)
            rows.append([name, f"{seconds:.0f}", ef, f"{recall(found, exact):.3f}", f"{p50:.3f}", f"{p99:.3f}"])
            print(rows[-1], flush=True)
        del index

    def faiss_build():
        faiss.omp_set_num_threads(threads)
        index = faiss.IndexHNSWFlat(d, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = efc
        index.add(corpus)
        faiss.omp_set_num_threads(1)  # one query per call: as sbert's index searches few queries
        return index

    def faiss_ef(index, ef):
        index.hnsw.efSearch = ef

    run(f"FAISS {faiss.__version__} IndexHNSWFlat", faiss_build, faiss_ef, lambda ix, q: ix.search(q, 10)[1][0])

    def hnswlib_build():
        index = hnswlib.Index(space="ip", dim=d)
        index.init_index(max_elements=n, ef_construction=efc, M=m)
        index.add_items(corpus, np.arange(n), num_threads=threads)
        return index

    run("hnswlib 0.8.0", hnswlib_build, lambda ix, ef: ix.set_ef(ef), lambda ix, q: ix.knn_query(q, 10)[0][0])

    def usearch_build():
        index = UsearchIndex(ndim=d, metric="ip", dtype="f32", connectivity=m, expansion_add=efc)
        index.add(np.arange(n), corpus, threads=threads)
        return index

    def usearch_ef(index, ef):
        index.expansion_search = ef

    run("usearch (f32)", usearch_build, usearch_ef, lambda ix, q: np.atleast_2d(ix.search(q, 10).keys)[0])
    faiss.omp_set_num_threads(threads)
    return markdown_table(["library", "build (s)", "ef search", "recall@10", "p50 ms", "p99 ms"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--library-size", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--sigma", type=float, default=0.025, help="noise per coordinate of the copies")
    parser.add_argument("--hnsw-m", type=int, default=32)
    parser.add_argument("--ef-construction", type=int, default=128)
    parser.add_argument("--skip-libraries", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the built indexes in benchmarks/.work")
    args = parser.parse_args()
    threads = torch.get_num_threads()
    random.seed(args.seed)

    texts, emb = embedded(data_dir(args.data), SOURCES)
    corpus, queries, n_real = make_corpus(emb, args.size, args.queries, args.sigma, args.seed)
    cos_copy = 1 / np.sqrt(1 + args.sigma**2 * emb.shape[1])
    print(f"corpus {corpus.shape}, {n_real:,} real rows, queries {queries.shape}", flush=True)

    lib_lines = []
    if not args.skip_libraries:
        sub = corpus[: args.library_size]
        lib_lines = compare_libraries(sub, queries, args.hnsw_m, args.ef_construction, threads)

    root = WORK / "search-bench"
    shutil.rmtree(root, ignore_errors=True)
    builds = {
        "exact": {},
        "hnsw": {"ann": True, "hnsw_m": args.hnsw_m, "ef_construction": args.ef_construction},
        "int8": {"quantization": "int8"},
        "binary": {"quantization": "binary"},
    }
    rows = []
    truth = None
    for name, options in builds.items():
        began = time.perf_counter()
        index = VectorIndex.build(root / name, corpus, model="default", show_progress=False, **options)
        build_s = time.perf_counter() - began
        vectors_b = folder_bytes(root / name, "seg-*.npy")
        struct_b = folder_bytes(root / name, f"{name}-*.faiss")
        if name == "exact":
            # Ground truth for every method: exact float32 top-10, in batches.
            batches = range(0, len(queries), 100)
            truth = np.vstack([index.search_rows(queries[i : i + 100], 10).indices for i in batches])
            settings = [("", {})]
        elif name == "hnsw":
            settings = [(f"ef_search={ef}", {"ef_search": ef}) for ef in (16, 32, 64, 128)]
        else:
            settings = [(f"rescore x{r}", {"rescore": r}) for r in ((1, 4) if name == "int8" else (1, 4, 10, 20))]
        for label, kwargs in settings:

            def one(q, index=index, kwargs=kwargs):
                return index.search_rows(q, 10, **kwargs).indices[0]

            found, p50, p99 = latencies(one, queries)
            memory = vectors_b if name == "exact" else struct_b
            rows.append(
                [
                    f"{name} {label}".strip(),
                    f"{build_s:.0f}",
                    f"{memory / 2**20:,.0f}",
                    f"{recall(found, truth):.3f}",
                    f"{p50:.2f}",
                    f"{p99:.2f}",
                ]
            )
            print(rows[-1], flush=True)
        del index
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)

    lines = [
        "# Search over 1,000,000 vectors: exact, HNSW, int8 and binary",
        "",
        f"Corpus: {args.size:,} vectors of dimension {emb.shape[1]}. {n_real:,} are all-MiniLM-L6-v2 embeddings of "
        f"distinct sentences from the shared data (STSb, SICK, SNLI dev/test, STS12, SentEval tasks: {len(texts):,} "
        f"in all, {args.queries:,} held out as queries); the other {args.size - n_real:,} are noise-perturbed "
        f"copies of random real rows, normalise(x + {args.sigma} g) with g ~ N(0, I) (cosine to the source "
        f"~{cos_copy:.2f}). Queries are the held-out real sentences' embeddings, searched one at a time.",
        "",
        "Recall@10 is against exact float32 search over the same vectors. 'memory' is what the method "
        "holds to search: the float32 matrix for exact, the FAISS structure for the others (the HNSW "
        "structure includes the float vectors). int8 and binary re-score their best k x rescore rows "
        "with the float32 vectors, which stay memory-mapped on disk (only those rows are read).",
        "",
        *markdown_table(["method", "build (s)", "memory (MiB)", "recall@10", "p50 ms", "p99 ms"], rows),
        "",
    ]
    if lib_lines:
        lines += [
            f"## Choosing the ANN library (first {args.library_size:,} rows, M={args.hnsw_m}, "
            f"efConstruction={args.ef_construction}, {threads} threads)",
            "",
            *lib_lines,
            "",
        ]
    lines += [
        f"- HNSW: M={args.hnsw_m}, efConstruction={args.ef_construction} (sbert's defaults); build uses "
        f"{threads} threads; searches run one query per call.",
        *environment_lines(threads, ("sbert", "torch", "numpy", "faiss-cpu", "hnswlib", "usearch")),
    ]
    write_result("search.md", lines)


if __name__ == "__main__":
    main()
