"""One static model, four ways of running it, one CPU, one run: batch-1 latency and batch-32 throughput.

The model is ``sbert distill default`` (model2vec's method and defaults, 256 dims; built once into
benchmarks/.work/static-latency). Rows, all encoding the same folder:

- sbert: ``Encoder.encode``, which runs a static model's table mean in numpy (``Encoder.table_sentences``);
- sbert, modules path: the same with that shortcut off, so the modules run in torch (what every static
  encode ran before the shortcut; what a Dense after the table still runs);
- model2vec: ``StaticModel.encode`` of the folder (the reference for static models);
- sentence-transformers: ``SentenceTransformer(folder).encode`` (its ``StaticEmbedding``).

Each row is timed in turn, ``--rounds`` times round-robin, and reported as the median of its rounds, so load
from another process on the shared cores lowers one round of every row rather than all rounds of one. Latency:
one STSb/SICK sentence per call, p50 over ``--latency`` calls a round; throughput: ``--texts`` sentences at
batch 32. Results only compare within one run (the machine behind "AMD EPYC" changes between runs).

    python -m benchmarks.static_latency [--rounds 5] [--latency 2000] [--texts 10000] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.lib import (
    RESULTS,
    WORK,
    cpu_name,
    environment_lines,
    latency_ms,
    markdown_table,
    write_between_markers,
    write_result,
)
from benchmarks.static import rate

DOC = RESULTS / "cpu-evidence.md"
BEGIN, END = "<!-- benchmarks/static_latency.py: begin -->", "<!-- benchmarks/static_latency.py: end -->"
FOLDER = WORK / "static-latency" / "distilled"


def distilled() -> Path:
    """The distilled folder, built by ``sbert distill default`` when missing."""
    if not (FOLDER / "model.safetensors").is_file():
        FOLDER.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "sbert", "distill", "default", "--out", str(FOLDER), "--device", "cpu"]
        subprocess.run(command, check=True)
    return FOLDER


def encoders(folder: Path) -> dict[str, Callable[[list[str]], np.ndarray]]:
    """Each row's ``encode(texts) -> (n, dim)``, all normalised as the folder says (model2vec's config)."""
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    import sbert

    ours = sbert.load(folder)
    modules_only = sbert.load(folder)
    modules_only._torch.shortcut = None  # the modules' path: what a static encode ran before the shortcut
    reference = StaticModel.from_pretrained(str(folder))
    st = SentenceTransformer(str(folder), device="cpu")
    return {
        "sbert": lambda texts: ours.encode(texts, batch_size=32, on_truncation="ignore"),
        "sbert, modules path (shortcut off)": lambda texts: modules_only.encode(
            texts, batch_size=32, on_truncation="ignore"
        ),
        "model2vec StaticModel": lambda texts: reference.encode(texts, batch_size=32),
        "sentence-transformers": lambda texts: st.encode(texts, batch_size=32, show_progress_bar=False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None, help="data folder (default: SBERT_DATA or ../shared/data)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=int, default=2000, help="one-sentence calls a round")
    parser.add_argument("--texts", type=int, default=10_000, help="sentences a throughput round")
    args = parser.parse_args()

    import torch

    from benchmarks.lib.sentences import sentences
    from sbert.data.paths import data_dir

    began, load = time.perf_counter(), os.getloadavg()[0]
    texts = sentences(data_dir(args.data), ("stsb", "sick"))[: args.texts]
    rows = encoders(distilled())
    vectors = {name: np.asarray(encode(texts[:500]), dtype=np.float32) for name, encode in rows.items()}
    apart = {name: float(np.abs(v - vectors["model2vec StaticModel"]).max()) for name, v in vectors.items()}
    latencies: dict[str, list[float]] = {name: [] for name in rows}
    rates: dict[str, list[float]] = {name: [] for name in rows}
    for number in range(args.rounds):
        print(f"round {number + 1} of {args.rounds}", flush=True)
        for name, encode in rows.items():
            latencies[name].append(latency_ms(lambda t, e=encode: e([t]), texts[: args.latency])[0])
            rates[name].append(rate(encode, texts, 0.0))
    reference = statistics.median(latencies["model2vec StaticModel"])
    body = [
        [
            name,
            f"{statistics.median(latencies[name]):.3f}",
            f"{statistics.median(latencies[name]) / reference:.2f}",
            f"{statistics.median(rates[name]):,.0f}",
            " / ".join(f"{r:,.0f}" for r in rates[name]),
            f"{apart[name]:.1e}",
        ]
        for name in rows
    ]
    header = ["row", "batch-1 p50 ms", "x model2vec's", "sentences/s at batch 32", "rounds", "max |diff| to model2vec"]
    lines = [
        f"`sbert distill default` (256 dims), {len(texts):,} STSb/SICK sentences; each row timed in turn, "
        f"{args.rounds} rounds, medians; latency: one sentence a call, p50 of {args.latency} calls a round.",
        "",
        *markdown_table(header, body),
        "",
        f"Wall time {time.perf_counter() - began:.0f} s; load average before {load:.2f}, after "
        f"{os.getloadavg()[0]:.2f}; CPU {cpu_name()}.",
        "",
        *environment_lines(torch.get_num_threads(), ("torch", "model2vec", "sentence-transformers", "numpy")),
    ]
    write_result("static_latency.md", lines)
    write_between_markers(DOC, BEGIN, END, lines)


if __name__ == "__main__":
    main()
