"""The watcher of a local Ray cluster that ``sbert.parallel.ray_engine.start_ray`` starts: once the process
that started the cluster ends, however it ends (``stop_ray``, an error, SIGTERM, SIGKILL), it kills every
process of that cluster that is still alive, then exits.

Run as a script by path (``python -I ray_watch.py DRIVER_PID TOKEN``), standard library only, so it starts
in milliseconds and needs no ``sbert`` on its path. It blocks reading its standard input, a pipe whose only
writer is the driver: end of file means the driver closed it or died. Then, for up to ``SWEEP_S`` seconds,
it SIGKILLs every process whose environment holds ``JOB_ENV=TOKEN`` (set while the driver ran
``ray.init``, so the GCS, raylet, agents and every worker inherit it), until none has been seen for
``QUIET_S`` seconds. Linux only (``/proc``); elsewhere it finds nothing and exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

# Set, with a fresh token, in the environment of every process of a local cluster the driver starts.
JOB_ENV = "SBERT_RAY_JOB"
SWEEP_S = 10.0
QUIET_S = 2.0  # a sweep ends once no process of the job has been seen for this long


def job_processes(token: str, spare: set[int]) -> list[int]:
    """Ids of the live processes (not ``spare``) whose initial environment holds ``JOB_ENV=token``."""
    marker = f"{JOB_ENV}={token}".encode()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.isdigit() or int(entry) in spare:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:  # gone, or not ours
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry))
    return found


def sweep(token: str, spare: set[int], limit_s: float = SWEEP_S) -> None:
    """SIGKILL the job's processes until none has been seen for ``QUIET_S`` seconds (a dying raylet may
    still be starting a worker or an agent; on a loaded machine that takes a while) or ``limit_s`` has passed."""
    now = time.monotonic()
    deadline, last_seen = now + limit_s, now
    while time.monotonic() - last_seen < QUIET_S and time.monotonic() < deadline:
        pids = job_processes(token, spare)
        if pids:
            last_seen = time.monotonic()
        for pid in pids:
            with contextlib.suppress(OSError):  # gone already
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def main(argv: list[str]) -> None:
    """``argv``: DRIVER_PID TOKEN. Waits for end of file on stdin, then sweeps."""
    driver, token = int(argv[1]), argv[2]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle; this one cleans up after
    while sys.stdin.buffer.read(4096):
        pass
    sweep(token, {driver, os.getpid()})


if __name__ == "__main__":
    main(sys.argv)
