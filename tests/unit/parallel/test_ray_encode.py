"""sbert.parallel.ray_engine: the sharded encode on a real local Ray cluster (Ray Data actor pool), never a mock."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.cli import main
from sbert.parallel import load_table, load_vectors


def test_address_without_the_ray_engine_is_refused(tmp_path):
    (tmp_path / "in.txt").write_text("a text\n")
    args = ["encode", str(tmp_path / "in.txt"), "--out", str(tmp_path / "o"), "--address", "auto"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "use it with --engine ray" in result.output
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def kill_token(tmp_path_factory):
    """A file that, once it exists, the next actor call removes before killing its actor (SIGKILL)."""
    return tmp_path_factory.mktemp("kill") / "token"


@pytest.fixture(scope="module")
def ray_cluster(kill_token):
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'sbert[ray]'")
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'sbert[ray]'")
    from sbert.parallel.ray_engine import KILL_TOKEN_ENV, start_ray, stop_ray

    with pytest.MonkeyPatch.context() as patch:  # the cluster's processes inherit it
        patch.setenv(KILL_TOKEN_ENV, str(kill_token))
        session = start_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    stop_ray(session)
    # Ray's driver handler must not outlive it: later tests (and the user's program) keep their own.
    assert signal.getsignal(signal.SIGTERM) is session.handlers[signal.SIGTERM]


@pytest.fixture(scope="module")
def texts(stsb_sentences) -> list[str]:
    return stsb_sentences[:100]


@pytest.fixture(scope="module")
def expected(model, texts) -> np.ndarray:
    return model.encode(texts, batch_size=16)


@pytest.fixture(scope="module")
def on_ray(ray_cluster, texts, tmp_path_factory):
    from sbert.parallel.ray_engine import encode_with_ray

    out = tmp_path_factory.mktemp("ray") / "out"
    # 7 shards sent 4 at a time: two windows, each with its own pool of 2 actors
    run = encode_with_ray("default", texts, out, num_actors=2, shard_size=16, window=4, batch_size=16)
    return out, run


@pytest.mark.slow
def test_ray_equals_single_process_encode_in_input_order(on_ray, texts, expected):
    out, run = on_ray
    assert (run.rows, run.shards, run.written, run.skipped) == (100, 7, list(range(7)), [])
    got = load_vectors(out)
    assert got.shape == (100, 384) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    table = load_table(out)
    assert table["id"].to_pylist() == list(range(100)) and table["text"].to_pylist() == texts
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and [manifest["shards"][str(i)]["rows"] for i in range(7)] == [16] * 6 + [4]


@pytest.mark.slow
def test_ray_resume_recomputes_only_the_missing_shard(on_ray, texts, expected, tmp_path):
    from sbert.parallel.ray_engine import encode_with_ray

    out = tmp_path / "out"
    shutil.copytree(on_ray[0], out)
    (out / "shard-000005.parquet").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*") if "000005" not in p.name}
    run = encode_with_ray("default", texts, out, num_actors=2, shard_size=16, batch_size=16)
    assert (run.written, run.skipped) == ([5], [0, 1, 2, 3, 4, 6])
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*") if "000005" not in p.name} == before
    np.testing.assert_allclose(load_vectors(out), expected, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_cli_engine_ray_writes_the_shard_folder(ray_cluster, texts, expected, tmp_path):
    source, out = tmp_path / "in.txt", tmp_path / "out"
    source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    args = ["encode", str(source), "--out", str(out), "--engine", "ray", "--processes", "2", "--shard-size", "50"]
    result = CliRunner().invoke(main, [*args, "--batch-size", "16"])
    assert result.exit_code == 0, result.output
    assert "wrote 100 embeddings in 2 shards" in result.output and "2 encoded now" in result.output
    np.testing.assert_allclose(load_vectors(out), expected, atol=1e-6, rtol=0)
    again = CliRunner().invoke(main, [*args, "--batch-size", "16"])
    assert again.exit_code == 0 and "0 encoded now (2 finished earlier, kept)" in again.output


@pytest.mark.slow
def test_an_actor_killed_mid_run_is_replaced_and_nothing_is_lost_or_duplicated(
    ray_cluster, kill_token, texts, expected, tmp_path
):
    """kill -9 of an actor while it encodes: Ray Data restarts it and retries its chunk; every shard is
    written once and the vectors are those of one process."""
    from sbert.parallel.ray_engine import encode_with_ray

    kill_token.write_text("")
    out = tmp_path / "out"
    run = encode_with_ray("default", texts, out, num_actors=2, shard_size=16, window=4, batch_size=16)
    assert not kill_token.exists()  # an actor took the token: it died
    assert (run.rows, run.written, run.skipped) == (100, list(range(7)), [])
    np.testing.assert_allclose(load_vectors(out), expected, atol=1e-6, rtol=0)
    assert load_table(out)["id"].to_pylist() == list(range(100))


# --- the local cluster listens on loopback only, and dies with the command (Linux: read from /proc) ---

linux_only = pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="reads /proc (Linux)")


def _live(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _live(int(entry.name)):
            with _suppress_gone():
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        found.add(pid := todo.pop())
        todo += children.get(pid, [])
    return found - {root}


def _marked(marker: str) -> set[int]:
    """Live processes whose environment holds ``marker`` (what every process of a job inherits)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with _suppress_gone():
                if marker.encode() in (entry / "environ").read_bytes().split(b"\0") and _live(int(entry.name)):
                    found.add(int(entry.name))
    return found


def _suppress_gone():
    import contextlib

    return contextlib.suppress(OSError, IndexError, ValueError)


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)  # /proc/net/tcp*: 32-bit words in host (little-endian) order
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(raw)


def _listening(pids: set[int]) -> list[tuple[int, str, int, str]]:
    """(pid, address, port, program name) of every TCP socket in LISTEN state held by a process in ``pids``."""
    owner: dict[str, int] = {}
    for pid in pids:
        with _suppress_gone():
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with _suppress_gone():
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        owner[target[8:-1]] = pid
    found = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in owner:  # 0A: LISTEN
                hex_address, hex_port = fields[1].split(":")
                pid = owner[fields[9]]
                with _suppress_gone():
                    command = Path(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()).name
                found.append((pid, str(_address(hex_address)), int(hex_port, 16), command))
    return found


def _off_loopback(sockets: list[tuple[int, str, int, str]]) -> list[tuple[int, str, int, str]]:
    def loopback(text: str) -> bool:
        address = ipaddress.ip_address(text)
        mapped = getattr(address, "ipv4_mapped", None)
        return (mapped or address).is_loopback

    return [s for s in sockets if not loopback(s[1])]


@linux_only
@pytest.mark.slow
def test_the_local_cluster_listens_on_loopback_only(ray_cluster):
    """Every listening socket of the cluster's processes (GCS, raylet, agents, workers) is on 127.0.0.1."""
    sockets = _listening(_descendants(os.getpid()))
    assert {"gcs_server", "raylet"} <= {name for *_, name in sockets}, sockets  # the check sees the cluster
    assert _off_loopback(sockets) == []


@pytest.fixture()
def long_input(tmp_path) -> Path:
    """Far more texts than a test lets run: the job is killed while it encodes."""
    source = tmp_path / "in.txt"
    source.write_text("".join(f"sentence number {i} is about a topic of its own\n" for i in range(50_000)))
    return source


@linux_only
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_sbert_encode_on_ray_listens_on_loopback_only_and_its_processes_die_with_it(signum, long_input, tmp_path):
    """A real `sbert encode --engine ray`: while it encodes, no socket of its processes (the driver and all the
    Ray processes it started, found by an environment marker they inherit) listens off loopback; killed
    (SIGKILL, SIGTERM), none of them is left a few seconds later."""
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'sbert[ray]'")
    marker = f"SBERT_TEST_JOB={uuid.uuid4().hex}"
    out = tmp_path / "out"
    command = [sys.executable, "-m", "sbert", "encode", str(long_input), "--out", str(out), "--engine", "ray"]
    env = dict(os.environ, **dict([marker.split("=")]))
    env.pop("RAY_ADDRESS", None)
    job = subprocess.Popen(
        [*command, "--processes", "2", "--shard-size", "50"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 300  # Ray's start and two model loads; slow on a loaded 2-core machine
        while not (out / "shard-000000.npy").exists():
            assert job.poll() is None, job.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "no shard written in 300 s"
            time.sleep(0.2)
        processes = _marked(marker)
        sockets = _listening(processes)
        assert job.poll() is None, "the job ended before its sockets were read: give it more input"
        assert job.pid in processes and len(processes) >= 5, processes  # driver, GCS, raylet, 2 actors, ...
        assert {"gcs_server", "raylet"} <= {name for *_, name in sockets}, sockets
        assert _off_loopback(sockets) == []
    finally:
        job.send_signal(signum)
        job.wait(timeout=60)
        job.stderr.close()
    deadline = time.monotonic() + 10
    while (left := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"{signal.Signals(signum).name}: processes of the job alive 10 s later: {_commands(left)}"


def _commands(pids: set[int]) -> dict[int, str]:
    found = {}
    for pid in pids:
        with _suppress_gone():
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
    return found
