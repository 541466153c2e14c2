"""Peak memory of one training step of in-batch negatives on the CPU: plain vs gradient-cached.

Each configuration runs in a fresh process (one forward and backward of the default model on SciFact
(claim, abstract) pairs of the train judgments, abstracts truncated at 256 tokens) and reports its peak
resident set size; the model and the data alone are measured the same way. Writes
benchmarks/results/cached_mnrl_memory.md.

    python -m benchmarks.cached_mnrl_memory [--configs plain:32,plain:64,cached:256:32]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def step(kind: str, rows: int, mini: int) -> dict:
    """One training step's peak RSS (MiB) and time, in this process."""
    import torch

    import sbert
    from sbert.data.beir_training_pairs import read_beir_pairs
    from sbert.data.paths import data_dir
    from sbert.losses import CachedMultipleNegativesRankingLoss, MultipleNegativesRankingLoss

    model = sbert.load("default", device="cpu")
    model.train()
    batch = read_beir_pairs(data_dir() / "retrieval" / "scifact")[:rows]
    began = time.perf_counter()
    if kind != "none":
        loss = CachedMultipleNegativesRankingLoss(mini_batch_size=mini) if kind == "cached" else None
        loss = loss or MultipleNegativesRankingLoss()
        loss(model, batch).backward()
    grads = sum(p.grad.numel() for p in model.parameters() if p.grad is not None)
    return {
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": time.perf_counter() - began,
        "grads": grads,
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="none:0,plain:32,plain:64,cached:256:32")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, rows, mini = [*args.child.split(":"), "0"][:3]
        print(json.dumps(step(kind, int(rows), int(mini))))
        return
    from benchmarks.lib import ROOT, environment_lines, markdown_table, write_result  # not in the child

    rows, threads = [], 0
    for config in args.configs.split(","):
        child = [sys.executable, "-m", "benchmarks.cached_mnrl_memory", "--child", config]
        out = subprocess.run(child, capture_output=True, text=True, check=True, cwd=ROOT)
        found = json.loads(out.stdout.strip().splitlines()[-1])
        threads = found["threads"]
        kind, n, *mini = config.split(":")
        what = (
            f"cached-mnrl, mini-batch {mini[0]}"
            if kind == "cached"
            else {"none": "model and data only"}.get(kind, "mnrl")
        )
        rows.append([what, n if kind != "none" else "-", f"{found['peak_mib']:,.0f}", f"{found['seconds']:.1f}"])
        print(config, found, flush=True)
    lines = ["# In-batch negatives: peak memory of one training step on the CPU", ""]
    lines += environment_lines(threads, ("torch", "transformers"))
    lines += ["", *markdown_table(["loss", "batch (pairs)", "peak RSS (MiB)", "step (s)"], rows), ""]
    write_result("cached_mnrl_memory.md", lines)


if __name__ == "__main__":
    main()
