"""Cold start of ``sbert search``: an index built with ``--backend onnx`` (the light path: ONNX Runtime and
tokenizers, no torch, no transformers) against one built with torch (the model loaded in full).

Each run is a new process (``python -m sbert search IX "query"``), timed end to end; the table gives the
median wall time of --repeats runs, the load average around them, and the largest entries of
``python -X importtime`` for each path. Writes benchmarks/results/cold_start.md and the table between the
markers in results/search-evidence.md. The machine may be shared: the load average is printed beside the figures.

    python -m benchmarks.cold_start [--repeats 5] [--rows 1000]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.lib import RESULTS, environment_lines, markdown_table, source_env, write_between_markers, write_result

DOC = RESULTS / "search-evidence.md"
BEGIN, END = "<!-- cold-start:begin -->", "<!-- cold-start:end -->"
QUERY = "how do I bake bread at home"


def _corpus(folder: Path, rows: int) -> Path:
    """``rows`` distinct short texts (what they say does not matter to a start-up time)."""
    topics = ("bread", "ovens", "rivers", "football", "guitars", "trains", "gardens", "coffee")
    texts = [f"note {i} on {topics[i % len(topics)]} and {topics[(i * 7) % len(topics)]}" for i in range(rows)]
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return corpus


def _build(corpus: Path, out: Path, backend: str) -> None:
    command = [sys.executable, "-m", "sbert", "index", "build", str(corpus), "-o", str(out), "--no-progress"]
    subprocess.run([*command, "--backend", backend], check=True, env=source_env(), capture_output=True)


def _cold_runs(index: Path, repeats: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system: what a quiet machine's wall time comes close to) per run."""
    times, cpu = [], []
    for _ in range(repeats):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sbert", "search", str(index), QUERY, "-k", "5"], check=True,
                       env=source_env(), capture_output=True)  # fmt: skip
        times.append(time.perf_counter() - began)
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime)
    return times, cpu


def _import_top(index: Path, n: int = 6) -> list[str]:
    """The largest cumulative top-level imports (``-X importtime``) of one search."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "sbert", "search", str(index), QUERY],
                          env=source_env(), capture_output=True, text=True, check=True)  # fmt: skip
    entries = []
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", line)
        if found and len(found.group(2)) <= 2:  # top-level packages (and their first children)
            entries.append((int(found.group(1)), found.group(3)))
    return [f"{name} {us / 1e6:.2f} s" for us, name in sorted(entries, reverse=True)[:n]]


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = _corpus(folder, args.rows)
        rows, imports = [], []
        for backend in ("onnx", "torch"):
            index = folder / f"index-{backend}"
            _build(corpus, index, backend)
            _cold_runs(index, 1)  # the file cache warm: what is measured is the interpreter's work
            before = os.getloadavg()[0]
            times, cpu = _cold_runs(index, args.repeats)
            after = os.getloadavg()[0]
            path = "light (onnxruntime + tokenizers)" if backend == "onnx" else "full (torch + transformers)"
            seconds = [f"{statistics.median(times):.2f}", f"{min(times):.2f}", f"{max(times):.2f}"]
            rows.append(
                [f"--backend {backend}", path, *seconds, f"{statistics.median(cpu):.2f}", f"{before:.1f} / {after:.1f}"]
            )
            imports.append(f"- `--backend {backend}`: " + ", ".join(_import_top(index)))
    header = ["index built with", "query path", "median s", "min s", "max s", "median CPU s", "load avg before / after"]
    table = markdown_table(header, rows)
    note = (
        f'{args.repeats} cold runs each of `sbert search IX "{QUERY}" -k 5` on a {args.rows:,}-row index '
        f"({os.cpu_count()} logical cores): wall time end to end, and the process's CPU time (user + system), "
        "which a loaded machine does not stretch and a quiet one's wall time comes close to."
    )
    machine = environment_lines(_threads(), ("torch", "onnxruntime", "tokenizers"))
    lines = ["# sbert search: cold start", "", *machine, "", note, "", *table, "",
             "Largest imports (`python -X importtime`, cumulative):", "", *imports]  # fmt: skip
    write_result("cold_start.md", lines)
    write_between_markers(DOC, BEGIN, END, [note, "", *table, "", *imports])


if __name__ == "__main__":
    main()
