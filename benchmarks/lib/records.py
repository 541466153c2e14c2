"""Measured records: JSON files under benchmarks/results/records (committed) or benchmarks/.work."""

from __future__ import annotations

import json
from pathlib import Path


def load_record(path: Path, missing: dict | None = None) -> dict:
    """The record at ``path``, or ``missing`` (an empty dict unless given) when there is none yet."""
    if not path.is_file():
        return {} if missing is None else missing
    return json.loads(path.read_text(encoding="utf-8"))


def write_record(path: Path, record: dict | list) -> None:
    """Write a measured record (JSON) atomically, making its folder."""
    from sbert.atomic import atomic_file

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(record, indent=1) + "\n")
