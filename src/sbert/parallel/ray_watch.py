"""The watcher of a local Ray cluster that ``sbert.parallel.ray_engine.start_ray`` starts: once the process
that started the cluster ends, however it ends (``stop_ray``, an error, SIGTERM, SIGKILL), it kills every
process of that cluster that is still alive, then exits.

Run as a script by path (``python -I ray_watch.py DRIVER_PID TOKEN``), standard library only, so it starts
in milliseconds and needs no ``sbert`` on its path. It waits on its standard input, a pipe whose only writer
is the driver: end of file means the driver closed it or died. Which processes are the cluster's: those
whose environment holds ``JOB_ENV=TOKEN`` (set while the driver ran ``ray.init``, so the GCS and raylet
inherit it) and every descendant of theirs. The environment alone is not enough: Ray's agents and workers
rename themselves (``setproctitle``), which overwrites the start of the memory ``/proc/PID/environ`` reads,
and the raylet hands them its variables in no fixed order, so the token is sometimes erased; and once the
raylet dies with the driver its children belong to init, so the family tree is gone too. Hence, while the
driver lives, the watcher looks every ``POLL_S`` seconds and remembers the family (pid and start time, so a
reused pid is never mistaken for one); at the end, for up to ``SWEEP_S`` seconds, it SIGKILLs the family, the
token's carriers and their descendants until none has been seen for ``QUIET_S`` seconds. Linux only
(``/proc``); elsewhere it finds nothing and exits.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

# Set, with a fresh token, in the environment of every process of a local cluster the driver starts.
JOB_ENV = "SBERT_RAY_JOB"
SWEEP_S = 10.0
QUIET_S = 2.0  # a sweep ends once no process of the job has been seen for this long
POLL_S = 0.5  # while the driver lives: how often the family is looked up

Process = tuple[int, int]  # (pid, start time in clock ticks since boot): one process, never a reused pid


def _table() -> dict[Process, int]:
    """Every live process (not a zombie) -> its parent's pid."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    table = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):  # gone
            continue
        if fields[0] != b"Z":  # fields: state, ppid, ... starttime is the 20th after the name
            table[(int(entry), int(fields[19]))] = int(fields[1])
    return table


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read().split(b"\0")
    except OSError:  # gone, or not ours
        return False


class Family:
    """The processes of one job: the token's carriers and their descendants, remembered once seen."""

    def __init__(self, token: str, spare: set[int]) -> None:
        self.marker = f"{JOB_ENV}={token}".encode()
        self.spare = spare
        self.members: set[Process] = set()
        self.looked: set[Process] = set()  # environments already read (a process's start is all it tells)

    def look(self) -> list[int]:
        """Update the family from the process table; the pids of its members alive now."""
        table = _table()
        for process in table.keys() - self.looked:
            if _carries(process[0], self.marker):
                self.members.add(process)
        self.looked = set(table)
        self.members &= table.keys()  # the dead (and so any reuse of their pids) are forgotten
        children: dict[int, list[Process]] = {}
        for process, parent in table.items():
            children.setdefault(parent, []).append(process)
        todo = [pid for pid, _ in self.members]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in self.members:
                    self.members.add(child)
                    todo.append(child[0])
        return sorted(pid for pid, _ in self.members if pid not in self.spare)


def sweep(family: Family, limit_s: float = SWEEP_S) -> None:
    """SIGKILL the family until none of it has been seen for ``QUIET_S`` seconds (a dying raylet may still
    be starting a worker or an agent; on a loaded machine that takes a while) or ``limit_s`` has passed."""
    now = time.monotonic()
    deadline, last_seen = now + limit_s, now
    while time.monotonic() - last_seen < QUIET_S and time.monotonic() < deadline:
        pids = family.look()
        if pids:
            last_seen = time.monotonic()
        for pid in pids:
            with contextlib.suppress(OSError):  # gone already
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def watch(family: Family, stream: int = 0, poll_s: float = POLL_S) -> None:
    """Look at the family every ``poll_s`` seconds until end of file on ``stream``."""
    while True:
        ready, _, _ = select.select([stream], [], [], poll_s)
        if ready and not os.read(stream, 4096):
            return
        family.look()


def main(argv: list[str]) -> None:
    """``argv``: DRIVER_PID TOKEN. Watches until end of file on stdin, then sweeps."""
    driver, token = int(argv[1]), argv[2]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle; this one cleans up after
    family = Family(token, {driver, os.getpid()})
    watch(family)
    sweep(family)


if __name__ == "__main__":
    main(sys.argv)
