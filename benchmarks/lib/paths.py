"""Where the benchmarks read and write."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: every script runs from here
RESULTS = ROOT / "benchmarks" / "results"  # the committed tables (results/README.md indexes them)
# Measured rows (metrics and costs, no data), committed: a table assembled from several runs, on several
# machines, is rebuilt from them anywhere, and a partial re-run adds to it instead of dropping the rest.
RECORDS = RESULTS / "records"
WORK = ROOT / "benchmarks" / ".work"  # trained models and caches, reused across scripts (not in git)
