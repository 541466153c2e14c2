"""Batches by count or by padded tokens: sentences/s of each backend on the STSb test sentences.

``encode(batch_size=N)`` takes N texts per batch; ``encode(batch_size=4096, max_tokens=T)`` takes as
many as fit in T padded token slots (rows x longest row), so short texts go in large batches and long
ones in small batches. ``packing=True`` (torch only) lays each batch's texts end to end without
padding. A second table shuffles the texts and turns sorting off, so every batch mixes lengths (what
a server's merged batch looks like), padded against packed. Same process, same threads; median of --rounds.

    python -m benchmarks.token_batching [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

import sbert
from benchmarks.lib import environment_lines, markdown_table, write_result
from benchmarks.lib.sentences import stsb_test_sentences
from sbert.data.paths import data_dir

SETTINGS = {
    "32 texts": {"batch_size": 32},
    "64 texts": {"batch_size": 64},
    "1,024 tokens": {"batch_size": 4096, "max_tokens": 1024},
    "2,048 tokens": {"batch_size": 4096, "max_tokens": 2048},
    "4,096 tokens": {"batch_size": 4096, "max_tokens": 4096},
    "packed, 2,048 tokens": {"batch_size": 4096, "max_tokens": 2048, "packing": True},
    "packed, 8,192 tokens": {"batch_size": 4096, "max_tokens": 8192, "packing": True},
}
MIXED = {
    "padded, 32 texts": {"batch_size": 32},
    "padded, 256 texts": {"batch_size": 256},
    "packed, 32 texts": {"batch_size": 32, "packing": True},
    "packed, 256 texts": {"batch_size": 256, "packing": True},
}
BACKENDS = (("torch", "fp32"), ("torch", "bf16"), ("onnx", "fp32"), ("onnx", "int8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    texts = stsb_test_sentences(data_dir(args.data))
    shuffled = random.Random(0).sample(texts, len(texts))

    def rate(model, kwargs, items) -> float:
        times = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            model.encode(items, **kwargs)
            times.append(time.perf_counter() - began)
        return len(items) / statistics.median(times)

    rows, mixed_rows = [], []
    for backend, precision in BACKENDS:
        model = sbert.load("default", device="cpu", backend=backend, precision=precision)
        model.encode(texts[:500])
        torch_backend = backend == "torch"
        rates = {k: rate(model, kw, texts) for k, kw in SETTINGS.items() if torch_backend or "packing" not in kw}
        best = max(rates, key=rates.get)
        rows.append(
            [
                f"{backend} {precision}",
                *(f"{rates[k]:,.0f}" if k in rates else "–" for k in SETTINGS),
                f"{best} ({rates[best] / rates['32 texts']:.2f}x)",
            ]
        )
        print(rows[-1], flush=True)
        if torch_backend:
            mixed = {k: rate(model, {**kw, "sort_by_length": False}, shuffled) for k, kw in MIXED.items()}
            mixed_rows.append([f"{backend} {precision}", *(f"{mixed[k]:,.0f}" for k in MIXED)])
            print(mixed_rows[-1], flush=True)
    lines = [
        "# Batching by count or by tokens",
        "",
        f"{len(texts):,} STSb test sentences (short: ~13 tokens on average), smart batching, sentences/s, "
        f"median of {args.rounds} rounds.",
        "",
        *markdown_table(["backend", *SETTINGS, "best (vs 32 texts)"], rows),
        "",
        "Mixed lengths: the same sentences shuffled, `sort_by_length=False`, sentences/s.",
        "",
        *markdown_table(["backend", *MIXED], mixed_rows),
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "onnxruntime")),
    ]
    write_result("token_batching.md", lines)


if __name__ == "__main__":
    main()
