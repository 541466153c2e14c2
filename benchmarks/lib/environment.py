"""What ran a benchmark: the machine, the versions and the command, as every table states them."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from importlib import metadata
from pathlib import Path

from benchmarks.lib.paths import ROOT


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions(*packages: str) -> dict[str, str]:
    """Python's version and each installed package's ("not installed" where missing)."""
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


def command_line() -> str:
    """This run's command as typed at the repository root: ``python -m benchmarks.NAME ARGS``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = spec.name if spec is not None and spec.name else "benchmarks." + Path(sys.argv[0]).stem
    return shlex.join(["python", "-m", module, *sys.argv[1:]])


def environment_lines(threads: int, packages: tuple[str, ...]) -> list[str]:
    """The machine, torch's threads, the versions of ``packages``, the command and the date, as list items."""
    import torch

    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return [
        f"- machine: {cpu_name()}, {os.cpu_count()} logical cores, {mem_gib:.0f} GiB memory, GPU: {gpu}",
        f"- torch threads: {threads}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions(*packages).items()),
        f"- command: `{command_line()}`",
        f"- date: {datetime.date.today().isoformat()}",
    ]


def source_env() -> dict[str, str]:
    """The environment with this checkout's ``src/`` first on PYTHONPATH: sbert run as a child process is
    the code being measured, whatever sbert is installed."""
    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
