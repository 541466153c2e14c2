"""sbert.parallel.ray_engine: the sharded encode on a real local Ray cluster (Ray Data actor pool), never a mock."""

from __future__ import annotations

import json
import shutil
import signal

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
        handlers = start_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    stop_ray(handlers)
    # Ray's driver handler must not outlive it: later tests (and the user's program) keep their own.
    assert signal.getsignal(signal.SIGTERM) is handlers[signal.SIGTERM]


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
