"""The watcher behind a local Ray cluster (``sbert.parallel.ray_watch``), with plain processes standing in for
Ray's: once the driver's pipe closes it kills the job's processes (those carrying its token and their
descendants, even when a descendant's environment lost the token and its parent died first) and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sbert.parallel import ray_watch

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the watcher reads /proc (Linux)")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pids: list[int], limit_s: float) -> list[int]:
    deadline = time.monotonic() + limit_s
    while (left := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


# A token carrier starts, with a clean environment, a shell that starts `sleep 60` (the leaf), prints the
# leaf's pid and ends 2 s later: the leaf, whose environment never held the token, is left to init.
CARRIER = """
import subprocess, sys, time
subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; exec sleep 2"], env={"PATH": sys.argv[1]})
time.sleep(60)
"""


@linux_only
def test_once_the_driver_ends_its_job_dies_even_what_lost_the_token_and_its_parent_and_nothing_else():
    token = uuid.uuid4().hex
    watcher = subprocess.Popen(
        [sys.executable, "-I", ray_watch.__file__, str(os.getpid()), token], stdin=subprocess.PIPE
    )
    carrier = subprocess.Popen(
        [sys.executable, "-c", CARRIER, os.environ["PATH"]],
        env=dict(os.environ, **{ray_watch.JOB_ENV: token}),
        stdout=subprocess.PIPE,
        text=True,
    )
    bystander = subprocess.Popen(["sleep", "60"])  # the driver's, not the job's
    leaf = int(carrier.stdout.readline())
    try:
        time.sleep(2 + 4 * ray_watch.POLL_S)  # the shell ends; the watcher has looked meanwhile
        assert _alive(leaf) and _alive(carrier.pid) and watcher.poll() is None
        assert ray_watch.Family(token, set()).look() == [carrier.pid]  # the leaf alone shows no token
        watcher.stdin.close()  # what the driver's end (stop_ray, or death) does
        assert _wait_dead([leaf, carrier.pid], ray_watch.QUIET_S + 3) == []
        watcher.wait(timeout=ray_watch.SWEEP_S)
        assert _alive(bystander.pid)
    finally:
        for process in (bystander, carrier, watcher):
            process.kill()
            process.wait()
        if _alive(leaf):
            os.kill(leaf, 9)


@linux_only
def test_a_family_forgets_the_dead_and_a_reused_pid_and_never_names_a_process_it_spares():
    spared = subprocess.Popen(["sleep", "30"])
    try:
        start = int(Path(f"/proc/{spared.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        family = ray_watch.Family("no-such-token", spare={spared.pid})
        family.members = {(spared.pid, start), (os.getpid(), 0), (2**22 + 7, 1)}  # spared; "reused"; dead
        assert family.look() == []
        assert family.members == {(spared.pid, start)}
    finally:
        spared.kill()
        spared.wait()
