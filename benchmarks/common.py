"""What every benchmark prints: the machine, the versions, and a markdown table written atomically."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from importlib import metadata
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
WORK = Path(__file__).resolve().parent / ".work"  # trained models, reused across scripts (not in git)
# Measured rows (metrics and costs, no data), committed: a table assembled from several runs, on several
# machines, is rebuilt from them anywhere, and a partial re-run adds to it instead of dropping the rest.
RECORDS = RESULTS / "records"


def paper_recipe(epochs: int, seed: int = 42, max_steps: int | None = None):
    """The paper's training recipe (TrainConfig's defaults: batch 16, lr 2e-5, 10% warm-up), quiet and
    without checkpoints, as every benchmark trains."""
    from sbert.training import TrainConfig

    return TrainConfig(epochs=epochs, seed=seed, max_steps=max_steps, checkpoint_every=None, progress=False)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions(*packages: str) -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def device_name(device: str) -> str:
    """What ran it: ``cpu``, or the GPU's name (rows measured on a GPU say so in their tables)."""
    import torch

    return torch.cuda.get_device_name(0) if device.startswith("cuda") and torch.cuda.is_available() else "cpu"


def environment_lines(threads: int, packages: tuple[str, ...]) -> list[str]:
    import torch

    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return [
        f"- machine: {cpu_name()}, {os.cpu_count()} logical cores, {mem_gib:.0f} GiB memory, GPU: {gpu}",
        f"- torch threads: {threads}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions(*packages).items()),
        f"- command: `python {shlex.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}`",
        f"- date: {datetime.date.today().isoformat()}",
    ]


def markdown_table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def write_result(name: str, lines: list[str]) -> Path:
    """Print ``lines`` and write them to ``benchmarks/results/<name>`` atomically."""
    from sbert.atomic import atomic_file

    text = "\n".join(lines) + "\n"
    print(text)
    target = RESULTS / name
    with atomic_file(target, "w", encoding="utf-8") as handle:
        handle.write(text)
    print(f"wrote {target}")
    return target


def write_between_markers(doc: Path, begin: str, end: str, lines: list[str]) -> None:
    """Replace what stands between the markers ``begin`` and ``end`` in ``doc`` by ``lines`` (atomically)."""
    from sbert.atomic import atomic_file

    text = doc.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{doc}: the markers {begin} and {end} are missing")
    head, rest = text.split(begin, 1)
    with atomic_file(doc, "w", encoding="utf-8") as handle:
        handle.write(head + begin + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1])


def write_record(path: Path, record: dict | list) -> None:
    """Write a measured record (JSON) atomically."""
    import json

    from sbert.atomic import atomic_file

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(record, indent=1) + "\n")


def row_names(lines: list[str]) -> set[str]:
    """The first cells of a markdown text's table rows (headers and separators left out), by section:
    ``"## section|first cell"``, so that two tables may hold a row of the same name."""
    names, section, previous = set(), "", ""
    for line in lines:
        if line.startswith("#"):
            section = line.strip("# ").strip()
        elif line.startswith("|") and not set(line) <= set("|-: ") and not previous.startswith("|"):
            pass  # a header row: the line after it is the separator
        elif line.startswith("|") and not set(line) <= set("|-: "):
            names.add(f"{section}|{line.split('|')[1].strip()}")
        previous = line
    return names


def rows_lost(doc: Path, begin: str, end: str, lines: list[str]) -> list[str]:
    """The table rows that stand between ``begin`` and ``end`` in ``doc`` and that ``lines`` would drop."""
    text = doc.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        return []
    old = text.split(begin, 1)[1].split(end, 1)[0].splitlines()
    return sorted(row_names(old) - row_names(lines))
