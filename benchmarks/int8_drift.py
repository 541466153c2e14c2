"""How far ONNX int8 vectors are from torch float32 ones, per model: per-vector cosine and STSb scores.

For each model: the distinct STSb test sentences (shuffled, the first ``--n`` of them) are encoded
with torch fp32 and with ONNX Runtime int8; the cosine of each sentence's two vectors gives min, 1st
percentile, median and mean. STSb test Spearman (x100) is computed with fp32 vectors, with int8
vectors, and mixed (first sentences fp32, second ones int8: an index built with one and queried with
the other). Writes ``benchmarks/results/int8_drift.md``.

    python -m benchmarks.int8_drift --model default --model /tmp/mpnet/all-mpnet-base-v2 [--speed]

``--speed`` adds the default model's throughput per backend and precision on this CPU, with the CPU
flags that decide it (native bf16 needs AVX512-BF16 or AMX).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

import sbert
from benchmarks.lib import cpu_name, environment_lines, markdown_table, write_result
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def spearman(a: np.ndarray, b: np.ndarray, gold: list[float]) -> float:
    return 100 * spearmanr((unit(a) * unit(b)).sum(1), gold).statistic


def drift(name: str, sentences: list[str], pairs, batch_size: int) -> list[object]:
    """One table row: the model, its size, per-vector cosine figures and STSb Spearman."""
    began = time.perf_counter()
    fp32 = sbert.load(name, device="cpu")
    int8 = sbert.load(name, device="cpu", backend="onnx", precision="int8")
    cos = unit(fp32.encode(sentences, batch_size=batch_size)) * unit(int8.encode(sentences, batch_size=batch_size))
    cos = cos.sum(1)
    firsts, seconds = [p.sentence1 for p in pairs], [p.sentence2 for p in pairs]
    gold = [p.score for p in pairs]
    f1, f2 = fp32.encode(firsts, batch_size=batch_size), fp32.encode(seconds, batch_size=batch_size)
    i1, i2 = int8.encode(firsts, batch_size=batch_size), int8.encode(seconds, batch_size=batch_size)
    label = Path(str(fp32.path)).name if name != "default" else "all-MiniLM-L6-v2 (default)"
    print(f"{label}: done in {time.perf_counter() - began:.0f} s", flush=True)
    return [
        label,
        f"{sum(p.numel() for p in fp32.parameters()) / 1e6:.1f}M",
        len(sentences),
        f"{cos.min():.4f}",
        f"{np.percentile(cos, 1):.4f}",
        f"{np.median(cos):.4f}",
        f"{cos.mean():.4f}",
        f"{spearman(f1, f2, gold):.2f}",
        f"{spearman(i1, i2, gold):.2f}",
        f"{spearman(f1, i2, gold):.2f}",
    ]


def cpu_flags() -> str:
    """The CPU flags that decide bf16 and int8 speed (AVX2, AVX-512, VNNI, BF16, AMX)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
    return ", ".join(f for f in wanted if f in flags) or "none of AVX2/AVX-512/VNNI/BF16/AMX"


def speed(sentences: list[str], batch_size: int, rounds: int) -> list[list[object]]:
    """Sentences/s of the default model per backend and precision: rounds interleaved, best round kept."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bf16 on a CPU without native bf16: measured here on purpose
        models = {
            "torch fp32": sbert.load("default", device="cpu"),
            "torch bf16": sbert.load("default", device="cpu", precision="bf16"),
            "onnx fp32": sbert.load("default", device="cpu", backend="onnx"),
            "onnx int8": sbert.load("default", device="cpu", backend="onnx", precision="int8"),
        }
    best = dict.fromkeys(models, 0.0)
    for model in models.values():
        model.encode(sentences[:64], batch_size=batch_size)  # warm-up
    for _ in range(rounds):
        for name, model in models.items():
            began = time.perf_counter()
            model.encode(sentences, batch_size=batch_size)
            best[name] = max(best[name], len(sentences) / (time.perf_counter() - began))
    base = best["torch fp32"]
    return [[name, f"{rate:,.0f}", f"{rate / base:.2f}x"] for name, rate in best.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="model name or folder (repeatable; default: default)")
    parser.add_argument("--n", type=int, default=1000, help="STSb test sentences compared per model")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--data", default=None, help="data folder (default: the shared data folder)")
    parser.add_argument("--speed", action="store_true", help="also time the default model per backend/precision")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds with --speed (best kept)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pairs = list(read_stsb(data_dir(args.data) / "stsbenchmark" / "sts-test.csv"))
    sentences = sorted({s for p in pairs for s in (p.sentence1, p.sentence2)})
    random.Random(0).shuffle(sentences)
    rows = [drift(name, sentences[: args.n], pairs, args.batch_size) for name in args.model or ["default"]]
    header = ["model", "params", "sentences", "cos min", "cos p1", "cos median", "cos mean"]
    header += ["STSb fp32", "STSb int8", "STSb mixed (fp32 x int8)"]
    lines = [
        "# ONNX int8 against torch fp32: per-vector drift",
        "",
        "Cosine between each sentence's torch fp32 vector and its ONNX Runtime int8 vector (dynamic",
        "quantisation of the MatMul weights, per channel, 7-bit range: what `backend='onnx', precision='int8'`",
        "exports), on distinct STSb test sentences; STSb test Spearman x100 on all 1,379 pairs, with both",
        "sides fp32, both int8, and mixed (first sentences fp32, second int8).",
        "",
        *environment_lines(args.threads, ("sbert", "torch", "transformers", "onnxruntime")),
        "",
        *markdown_table(header, rows),
    ]
    if args.speed:
        lines += [
            "",
            f"## Speed on this CPU ({cpu_name()}; flags: {cpu_flags()})",
            "",
            f"all-MiniLM-L6-v2, {args.n} sentences, batch {args.batch_size}, {args.threads} threads, best of "
            f"{args.rounds} interleaved rounds (other processes on the machine add noise):",
            "",
            *markdown_table(
                ["backend", "sentences/s", "vs torch fp32"], speed(sentences[: args.n], args.batch_size, args.rounds)
            ),
        ]
    write_result("int8_drift.md", lines)


if __name__ == "__main__":
    main()
