"""Timing: seconds per call over alternating rounds, throughput and one-at-a-time latency."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timings(variants: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each variant over ``rounds`` alternating rounds (after the caller's warm-up)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
        print(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {t[-1]:.2f}s" for n, t in times.items()), flush=True)
    return times


def throughput(variants: dict[str, Callable[[], object]], n_texts: int, rounds: int) -> dict[str, float]:
    """Median texts per second of each variant: one warm-up call each, then alternating rounds."""
    for run in variants.values():
        run()
    return {name: n_texts / statistics.median(t) for name, t in timings(variants, rounds).items()}


def latency_ms(encode_one: Callable[[str], object], texts: list[str]) -> tuple[float, float]:
    """p50 / p99 milliseconds of ``encode_one(text)``, one text per call, after one warm-up call."""
    import numpy as np

    encode_one(texts[0])
    times = []
    for text in texts:
        began = time.perf_counter()
        encode_one(text)
        times.append((time.perf_counter() - began) * 1e3)
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))
