"""Batches by count or by padded tokens: sentences/s of each backend on the STSb test sentences.

``encode(batch_size=N)`` takes N texts per batch; ``encode(batch_size=4096, max_tokens=T)`` takes as
many as fit in T padded token slots (rows x longest row), so short texts go in large batches and long
ones in small batches. Same process, same threads; median of --rounds.

    python benchmarks/token_batching.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from common import environment_lines, markdown_table, write_result
from encode_throughput import stsb_test_sentences

import sbert
from sbert.data.paths import data_dir

SETTINGS = {
    "32 texts": {"batch_size": 32},
    "64 texts": {"batch_size": 64},
    "1,024 tokens": {"batch_size": 4096, "max_tokens": 1024},
    "2,048 tokens": {"batch_size": 4096, "max_tokens": 2048},
    "4,096 tokens": {"batch_size": 4096, "max_tokens": 4096},
}
BACKENDS = (("torch", "fp32"), ("torch", "bf16"), ("onnx", "fp32"), ("onnx", "int8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    texts = stsb_test_sentences(data_dir(args.data))
    rows = []
    for backend, precision in BACKENDS:
        model = sbert.load("default", device="cpu", backend=backend, precision=precision)
        model.encode(texts[:500])
        rates = {}
        for label, kwargs in SETTINGS.items():
            times = []
            for _ in range(args.rounds):
                began = time.perf_counter()
                model.encode(texts, **kwargs)
                times.append(time.perf_counter() - began)
            rates[label] = len(texts) / statistics.median(times)
        best = max(rates, key=rates.get)
        rows.append(
            [
                f"{backend} {precision}",
                *(f"{rates[k]:,.0f}" for k in SETTINGS),
                f"{best} ({rates[best] / rates['32 texts']:.2f}x)",
            ]
        )
        print(rows[-1], flush=True)
    lines = [
        "# Batching by count or by tokens",
        "",
        f"{len(texts):,} STSb test sentences (short: ~13 tokens on average), smart batching, sentences/s, "
        f"median of {args.rounds} rounds.",
        "",
        *markdown_table(["backend", *SETTINGS, "best (vs 32 texts)"], rows),
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "onnxruntime")),
    ]
    write_result("token_batching.md", lines)


if __name__ == "__main__":
    main()
