"""Scale: encoding with many processes and on Ray, data-parallel training, and pgvector against FAISS.

Three parts, each a table (``--parts encode,ddp,vectors``), written to benchmarks/results/scale.md and
into results/scale-evidence.md between the benchmark's markers:

- encode: the same ``--texts`` distinct sentences of the shared data (STSb, SICK, SNLI, STS12, SentEval)
  embedded by the default model: sbert in one call, ``encode_to_shards`` with 1 and 2 processes, Ray
  (``encode_with_ray``, 2 actors of 1 CPU on a local Ray started for it), sentence-transformers in one
  call and with its multi-process pool (2 CPU processes). Wall time includes starting workers and loading
  the model in each, as a user would see it; ratios are against sbert's one call.
- ddp: ``sbert train`` alone (torch's threads on every core) and ``sbert train --nproc 2`` (torchrun, gloo,
  one thread a rank), mean seconds a step over steps 3.. from ``log.jsonl`` (regression on STSb train,
  mnrl on its pairs; global batch ``--ddp-batch``).
- vectors: ``--vectors`` unit vectors of width 384: the default model's embeddings of the encode part's
  sentences, and (beyond them) mixtures of two of those embeddings with noise, normalised (a synthetic
  extension, stated in the table); 1,000 queries are embeddings of SciFact and openoffice-dups queries
  (texts not in the base). The FAISS folder index (``VectorIndex.build(ann=True)``) and pgvector
  (``PgVectorIndex.build``, PostgreSQL 16 + pgvector from pgserver on a Unix socket) with the same HNSW
  settings (m 16, ef_construction 64, pgvector's defaults): build time (the FAISS build also at
  ``--curve`` sizes, for the extrapolation), latency of one query at a time through the public API
  (p50/p99), recall@10 against exact search, size on disk and in memory.
- plan: the paper's 40 million Quora questions on a cluster, computed from the measured per-unit costs.

    python -m benchmarks.scale [--texts 100000] [--vectors 1000000] [--curve 100000,300000]
                               [--parts encode,ddp,vectors] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.lib import (
    RESULTS,
    WORK,
    cpu_name,
    environment_lines,
    markdown_table,
    write_between_markers,
    write_result,
)
from benchmarks.lib.sentences import sentences
from benchmarks.search import recall
from sbert.data.paths import data_dir

DOC = RESULTS / "scale-evidence.md"
BEGIN, END = "<!-- benchmarks/scale.py: begin -->", "<!-- benchmarks/scale.py: end -->"
SOURCES = ("stsb", "sick", "snli", "sts12", "senteval")
HNSW = {"hnsw_m": 16, "ef_construction": 64}
EF_SEARCH = (40, 100, 200, 400, 800)
QUORA = 40_000_000
DIM = 384


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    began = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - began, out


# -- encode ------------------------------------------------------------------------------------------
def encode_part(texts: list[str], work: Path) -> tuple[list[str], dict]:
    import torch
    from sentence_transformers import SentenceTransformer

    import sbert
    from sbert.model_names import resolve
    from sbert.parallel import encode_to_shards, load_vectors
    from sbert.parallel.ray_engine import encode_with_ray, start_ray, stop_ray

    source = work / "texts.txt"
    source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    n, runs = len(texts), []

    def shards(name: str) -> Path:
        out = work / name
        shutil.rmtree(out, ignore_errors=True)
        return out

    print(f"encode: {n:,} texts", flush=True)
    seconds, reference = timed(lambda: sbert.load("default", device="cpu").encode(texts, batch_size=32))
    runs.append(("sbert `encode`, one call (model load included)", seconds, None))
    for processes in (1, 2):
        out = shards(f"p{processes}")
        seconds, _ = timed(encode_to_shards, "default", source, out, processes=processes, batch_size=32)
        runs.append((f"sbert `encode --processes {processes} --out DIR` (shards)", seconds, load_vectors(out)))
    began = time.perf_counter()
    handlers = start_ray(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - began
    try:
        out = shards("ray")
        seconds, _ = timed(encode_with_ray, "default", source, out, num_actors=2, cpus_per_actor=1, batch_size=32)
    finally:
        stop_ray(handlers)
    runs.append(
        ("sbert `encode --engine ray --processes 2` (local Ray, 2 actors)", ray_start + seconds, load_vectors(out))
    )
    torch.set_num_threads(os.cpu_count() or 1)
    model = SentenceTransformer(str(resolve("default")), device="cpu")
    seconds, st_one = timed(model.encode, texts, batch_size=32)
    runs.append(("sentence-transformers `encode`, one call", seconds, st_one))
    seconds, st_pool = timed(model.encode, texts, batch_size=32, device=["cpu"] * 2)
    runs.append(("sentence-transformers `encode(device=['cpu', 'cpu'])` (its process pool)", seconds, st_pool))
    base = runs[0][1]
    rows = [
        [name, f"{s:.1f}", f"{n / s:,.0f}", f"{base / s:.2f}x", _diff(vectors, reference)] for name, s, vectors in runs
    ]
    table = markdown_table(["run", "seconds", "texts/s", "speed vs sbert one call", "max abs diff vs it"], rows)
    facts = {"texts_per_second": n / base, "ray_start_seconds": ray_start, "threads": torch.get_num_threads()}
    lines = [
        f"{n:,} distinct sentences (mean {np.mean([len(t) for t in texts]):.0f} characters), default model, "
        f"batch 32, CPU. Local Ray started in {ray_start:.1f} s (included in its row).",
        "",
        *table,
    ]
    np.save(work / "base.npy", reference)
    return lines, facts


def _diff(vectors, reference) -> str:
    return "-" if vectors is None else f"{np.abs(np.asarray(vectors) - reference).max():.1e}"


# -- ddp ---------------------------------------------------------------------------------------------
def ddp_part(data: Path, work: Path, batch: int, steps: int) -> tuple[list[str], dict]:
    from sbert.data.sts import read_stsb

    pairs = read_stsb(data / "stsbenchmark" / "sts-train.csv")
    tuples = work / "pairs.tsv"
    tuples.write_text("".join(f"{p.sentence1}\t{p.sentence2}\n" for p in pairs if p.score >= 4), encoding="utf-8")
    jobs = {
        "regression (paper, STSb train)": [
            "--objective",
            "regression",
            "--format",
            "stsb",
            "--train",
            str(data / "stsbenchmark" / "sts-train.csv"),
        ],
        "mnrl (in-batch negatives, gathered)": ["--objective", "mnrl", "--format", "ntuples", "--train", str(tuples)],
    }
    rows, facts = [], {}
    for name, args in jobs.items():
        times = {}
        for nproc in (1, 2):
            out = work / f"ddp-{len(times)}-{name.split()[0]}"
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(out.with_name(out.name + ".train"), ignore_errors=True)
            command = [sys.executable, "-m", "sbert", "train", *args, "--batch-size", str(batch)]
            command += ["--max-steps", str(steps), "--no-progress", "--device", "cpu", "--out", str(out)]
            command += ["--nproc", str(nproc)] if nproc > 1 else []
            print(f"ddp: {name}, {nproc} process(es)", flush=True)
            subprocess.run(command, check=True, capture_output=True, text=True)
            log = [
                json.loads(line) for line in (out.with_name(out.name + ".train") / "log.jsonl").read_text().splitlines()
            ]
            seconds = [row["seconds"] for row in log if "loss" in row]
            times[nproc] = (seconds[-1] - seconds[1]) / (len(seconds) - 2)  # steps 3..: no first-step warm-up
        rows.append([name, f"{times[1]:.2f}", f"{times[2]:.2f}", f"{times[1] / times[2]:.2f}x"])
        facts[name] = times
    lines = [
        f"Global batch {batch}, {steps} steps, default model on the CPU; seconds a step are the mean over steps 3 to "
        f"{steps} (log.jsonl). One process runs torch on {os.cpu_count()} threads; `--nproc 2` runs two ranks of "
        "one thread each (torchrun's OMP_NUM_THREADS=1), gloo all-reduce of the gradients each step.",
        "",
        *markdown_table(["objective", "1 process: s/step", "2 processes (DDP): s/step", "speed-up"], rows),
    ]
    return lines, facts


# -- vectors -----------------------------------------------------------------------------------------
def vector_base(work: Path, texts: list[str], total: int, seed: int = 0) -> tuple[np.ndarray, int]:
    """(total, 384) unit vectors: the real embeddings first, then noisy mixtures of two of them."""
    import sbert

    path = work / "base.npy"
    real = np.load(path) if path.is_file() else sbert.load("default", device="cpu").encode(texts, batch_size=32)
    real = real / np.linalg.norm(real, axis=1, keepdims=True)
    real = real[:total].astype(np.float32)
    out = np.empty((total, real.shape[1]), dtype=np.float32)
    out[: len(real)] = real
    rng = np.random.default_rng(seed)
    for start in range(len(real), total, 100_000):
        end = min(total, start + 100_000)
        a, b = rng.integers(0, len(real), end - start), rng.integers(0, len(real), end - start)
        mix = real[a] + rng.uniform(0.2, 0.8, (end - start, 1)).astype(np.float32) * real[b]
        mix += rng.normal(0, 0.15 / math.sqrt(real.shape[1]), mix.shape).astype(np.float32)
        out[start:end] = mix / np.linalg.norm(mix, axis=1, keepdims=True)
    return out, len(real)


def query_vectors(data: Path, count: int) -> np.ndarray:
    import sbert
    from sbert.data.beir import read_beir

    texts = []
    for name in ("scifact", "openoffice-dups"):
        texts += list(read_beir(data / "retrieval" / name, "test").queries.values())
    vectors = sbert.load("default", device="cpu").encode(texts[:count], batch_size=32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def exact_top(base: np.ndarray, queries: np.ndarray, k: int = 10) -> np.ndarray:
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(base), 200_000):
        scores = queries @ base[start : start + 200_000].T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        s = np.concatenate([best_s, np.take_along_axis(scores, top, 1)], 1)
        i = np.concatenate([best_i, top + start], 1)
        keep = np.argsort(-s, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(s, keep, 1), np.take_along_axis(i, keep, 1)
    return best_i


def latency_rows(name: str, search, queries: np.ndarray, truth: np.ndarray, settings=EF_SEARCH) -> list[list[str]]:
    """Recall@10 and p50/p99 ms of ``search(query, ef_search)``, one query at a time, for each setting."""
    rows = []
    for ef in settings:
        search(queries[0], ef)  # warm
        times, found = [], []
        for q in queries:
            began = time.perf_counter()
            found.append(search(q, ef))
            times.append((time.perf_counter() - began) * 1000)
        p50, p99 = np.percentile(times, [50, 99])
        rows.append([name, "-" if ef is None else str(ef), f"{recall(found, truth):.3f}", f"{p50:.2f}", f"{p99:.2f}"])
    return rows


RESIDENT = """
import sys, numpy as np
from pathlib import Path
from sbert.search.index.folder import VectorIndex
def rss():
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS"))
    return int(line.split()[1]) / 1024
before = rss()
index = VectorIndex.open(sys.argv[1])
index.search(np.load(sys.argv[2])[None], 10, method="hnsw")
print(rss() - before)
"""


def resident_mib(index: Path, query: np.ndarray) -> float:
    """MiB that opening the index and one HNSW search add to a fresh process's resident memory."""
    with tempfile.TemporaryDirectory() as folder:
        np.save(Path(folder) / "q.npy", query)
        done = subprocess.run(
            [sys.executable, "-c", RESIDENT, str(index), str(Path(folder) / "q.npy")],
            check=True,
            capture_output=True,
            text=True,
        )
    return float(done.stdout.strip().splitlines()[-1])


def folder_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def faiss_side(work: Path, base: np.ndarray, queries, truth, curve: list[int]) -> tuple[list, dict, list]:
    from sbert.search.index.folder import VectorIndex

    builds = {}
    for size in [*curve, len(base)]:
        out = work / f"faiss-{size}"
        shutil.rmtree(out, ignore_errors=True)
        print(f"vectors: FAISS HNSW build, {size:,} rows", flush=True)
        seconds, _ = timed(VectorIndex.build, out, base[:size], model="default", ann=True, show_progress=False, **HNSW)
        builds[size] = seconds
        if size != len(base):
            shutil.rmtree(out)
    index = VectorIndex.open(out)

    def search(q, ef):
        return [int(h.id) for h in index.search(q[None], 10, method="hnsw", ef_search=ef)[0]]

    rows = latency_rows("FAISS folder index (hnsw)", search, queries, truth)
    memory = resident_mib(out, queries[0])

    def exact(q, _):
        return [int(h.id) for h in index.search(q[None], 10, method="exact")[0]]

    rows += latency_rows("FAISS folder index (exact, 100 queries)", exact, queries[:100], truth[:100], (None,))
    return rows, builds, [folder_mib(out), memory]


def pgvector_side(base: np.ndarray, queries, truth, sizes: list[int]) -> tuple[list, dict, list, str]:
    import pgserver
    import psycopg

    from sbert.search.index.postgres import PgVectorIndex

    folder = Path(tempfile.mkdtemp(prefix="sbert-scale-pg-"))
    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        url = server.get_uri()
        builds = {}
        for size in sizes:
            print(f"vectors: pgvector build, {size:,} rows", flush=True)
            seconds, index = timed(
                PgVectorIndex.build,
                url,
                base[:size],
                model="default",
                table=f"scale_{size}",
                build_memory="4GB",
                **HNSW,
                overwrite=True,
            )
            builds[size] = seconds
            if size != len(base):
                index.close()
        rows = latency_rows(
            "pgvector (hnsw)",
            lambda q, ef: [int(h.id) for h in index.search(q[None], 10, ef_search=ef)[0]],
            queries,
            truth,
        )
        index.close()
        table = f"scale_{len(base)}"
        with psycopg.connect(url) as conn:
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
            sizes_sql = "SELECT pg_table_size(%s::regclass), pg_indexes_size(%s::regclass)"
            table_bytes, index_bytes = conn.execute(sizes_sql, (table, table)).fetchone()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    return rows, builds, [table_bytes / 2**20, index_bytes / 2**20], version


def vectors_part(data: Path, work: Path, texts: list[str], total: int, curve: list[int]) -> tuple[list[str], dict]:
    base, real = vector_base(work, texts, total)
    queries = query_vectors(data, 1000)
    seconds, truth = timed(exact_top, base, queries)
    print(
        f"vectors: {total:,} x {base.shape[1]}, exact top-10 of {len(queries)} queries in {seconds:.0f} s", flush=True
    )
    faiss_rows, faiss_builds, (faiss_disk, faiss_memory) = faiss_side(work, base, queries, truth, curve)
    pg_rows, pg_builds, (pg_table, pg_index), pg_version = pgvector_side(base, queries, truth, [curve[0], total])
    rows = faiss_rows + pg_rows
    build_rows = [
        [f"{size:,}", f"{faiss_builds[size]:.1f}", f"{pg_builds[size]:.1f}" if size in pg_builds else "-"]
        for size in sorted(faiss_builds)
    ]
    lines = [
        f"{total:,} unit vectors of width {base.shape[1]}: the default model's embeddings of {real:,} sentences, then "
        f"{total - real:,} synthetic ones (two of those embeddings mixed, a + u·b with u in [0.2, 0.8], plus noise, "
        "normalised): real text would be kinder to HNSW than this mixture is. 1,000 queries: embeddings of SciFact "
        "and openoffice-dups queries. HNSW m 16, ef_construction 64 on both sides; recall@10 against exact search.",
        "",
        "Build (seconds; FAISS: vectors saved and graph built, `VectorIndex.build(ann=True)`; pgvector: one "
        "transaction of binary COPY and `CREATE INDEX ... USING hnsw`, maintenance_work_mem 4GB, "
        f"PostgreSQL's pgvector extension {pg_version}):",
        "",
        *markdown_table(["vectors", "FAISS folder index s", "pgvector s"], build_rows),
        "",
        "One query at a time from Python, through the public API (`index.search(q, 10, ...)`), on the "
        f"{total:,}-vector index:",
        "",
        *markdown_table(["index", "ef_search", "recall@10", "p50 ms", "p99 ms"], rows),
        "",
        f"Size: FAISS folder index {faiss_disk:,.0f} MiB on disk (vectors kept for exact search and rescoring, and the "
        f"graph with its own copy), {faiss_memory:,.0f} MiB resident in a fresh process after opening it and one "
        f"HNSW search (vectors memory-mapped); pgvector table {pg_table:,.0f} MiB and HNSW index {pg_index:,.0f} MiB "
        "on disk (served from PostgreSQL's shared buffers and the OS page cache).",
    ]
    facts = {
        "faiss_builds": faiss_builds,
        "pg_builds": pg_builds,
        "faiss_disk": faiss_disk,
        "pg_index": pg_index,
        "pg_table": pg_table,
        "total": total,
    }
    return lines, facts


# -- the 40 million questions ------------------------------------------------------------------------
def plan(facts: dict) -> list[str]:
    """The 40M-question plan: arithmetic over the per-unit costs measured above."""
    cores, need = os.cpu_count() or 1, QUORA / 3600  # texts a second to embed 40M in an hour
    gib = QUORA * DIM / 2**30
    lines = [
        "For the paper's 40 million Quora questions, from the figures above:",
        "",
        f"- **Vectors**: float32 {gib * 4:.1f} GiB, int8 {gib:.1f} GiB, binary {gib / 8:.2f} GiB "
        f"(40M x {DIM} dimensions x 4, 1 and 1/8 bytes).",
    ]
    if "encode" in facts:
        rate = facts["encode"]["texts_per_second"]
        per_core = rate / cores
        lines.append(
            f"- **Encoding in an hour** needs {need:,.0f} texts/s. One call here embeds {rate:,.0f} short texts/s on "
            f"{cores} cores ({per_core:,.0f} a core): 40M take {QUORA / rate / 3600:,.1f} h on this machine, or one "
            f"hour on {math.ceil(need / per_core):,} such cores, e.g. {math.ceil(need / per_core / 16):,} Ray workers "
            "of 16 cores, if throughput grows with cores (the 2-process rows show what one machine gives). On GPUs: "
            f"divide {need:,.0f} by one GPU's rate (benchmarks/encode_throughput.py on it; not measured here)."
        )
    if "vectors" in facts:
        v = facts["vectors"]
        sizes = sorted(v["faiss_builds"])
        exponent, scale = np.polyfit(np.log(sizes), np.log([v["faiss_builds"][n] for n in sizes]), 1)
        whole, shard = math.exp(scale) * QUORA**exponent, math.exp(scale) * (QUORA / 8) ** exponent
        pg_row = v["pg_builds"][v["total"]] / v["total"]
        faiss_bytes = v["faiss_disk"] * 2**20 / v["total"]
        pg_bytes = (v["pg_index"] + v["pg_table"]) * 2**20 / v["total"]
        fit = ", ".join(f"{n:,}" for n in sizes)
        lines += [
            f"- **HNSW build**: the FAISS build time here grows as n^{exponent:.2f} (fit over {fit} vectors): 40M "
            f"in one graph ≈ {whole / 3600:,.1f} h on {cores} cores; 8 shards of 5M ≈ {shard / 3600:,.1f} h each, "
            f"side by side on 8 machines. pgvector took {pg_row * 1e3:.2f} ms a row at {v['total']:,}: at least "
            f"{pg_row * QUORA / 3600:,.0f} h for 40M on one such machine, more as the graph deepens.",
            f"- **Serving**: FAISS keeps {faiss_bytes:,.0f} bytes a vector (float32 vector + graph, measured): "
            f"{faiss_bytes * QUORA / 2**30:,.0f} GiB for 40M; pgvector {pg_bytes:,.0f} bytes a row (table + HNSW "
            f"index): {pg_bytes * QUORA / 2**30:,.0f} GiB, to be held in shared buffers and page cache for the "
            "latencies above. Either fits one machine of 128-256 GiB; shards by id hash over N nodes cut build "
            "time and memory per node N-fold, at the price of asking every shard (k from each, merged by score). "
            "int8 or binary vectors in memory with float32 rescoring from disk cut memory 4-32x.",
        ]
    return lines


def _int_keys(facts: dict) -> dict:
    """JSON's string keys of the build-time tables back to vector counts."""
    return {k: {int(n): t for n, t in v.items()} if k.endswith("_builds") else v for k, v in facts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=100_000)
    parser.add_argument("--vectors", type=int, default=1_000_000)
    parser.add_argument("--curve", default="100000,300000", help="smaller FAISS builds for the growth fit")
    parser.add_argument("--parts", default="encode,ddp,vectors")
    parser.add_argument("--ddp-batch", type=int, default=32)
    parser.add_argument("--ddp-steps", type=int, default=12)
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default="scale.md")
    parser.add_argument("--no-doc", action="store_true", help="leave results/scale-evidence.md as it is (quick runs)")
    args = parser.parse_args()
    data, parts = data_dir(args.data), args.parts.split(",")
    work = WORK / "scale"
    work.mkdir(parents=True, exist_ok=True)
    texts = sentences(data, SOURCES)[: args.texts]
    began = time.perf_counter()
    lines, facts = ["# Scale: measured", ""], {}
    curve = [int(s) for s in args.curve.split(",") if int(s) < args.vectors]
    runs = {
        "encode": ("Encoding: one process, many, Ray", lambda: encode_part(texts, work)),
        "ddp": ("Data-parallel training (torchrun)", lambda: ddp_part(data, work, args.ddp_batch, args.ddp_steps)),
        "vectors": (
            "pgvector and the FAISS folder index",
            lambda: vectors_part(data, work, texts, args.vectors, curve),
        ),
    }
    for name, (title, run) in runs.items():
        saved = work / f"{name}.json"
        if name in parts:
            part, facts[name] = run()
            saved.write_text(json.dumps({"lines": part, "facts": facts[name]}, indent=1))
        elif saved.is_file():  # an earlier run's table: kept, and said so
            earlier = json.loads(saved.read_text())
            part, facts[name] = earlier["lines"], _int_keys(earlier["facts"])
            part = [*part, "", f"(From an earlier run of this script, kept in benchmarks/.work/scale/{name}.json.)"]
        else:
            continue
        lines += [f"## {title}", "", *part, ""]
    lines += ["## The 40 million questions", "", *plan(facts), ""]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    lines += [
        f"Wall time {time.perf_counter() - began:,.0f} s; peak memory of the benchmark process {peak:,.0f} MiB. "
        f"CPU: {cpu_name()}. Ratios compare runs of this one invocation, one after the other on a quiet machine.",
        "",
        *environment_lines(
            os.cpu_count() or 1,
            ("sbert", "torch", "sentence-transformers", "ray", "faiss-cpu", "psycopg", "pgvector", "pgserver"),
        ),
    ]
    write_result(args.out, lines)
    if not args.no_doc:
        write_between_markers(DOC, BEGIN, END, lines[2:])


if __name__ == "__main__":
    main()
