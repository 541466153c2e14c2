"""The vector index in PostgreSQL (sbert.search.index.postgres) against a real server with pgvector.

The server is started here by ``pgserver`` (PostgreSQL 16 with pgvector, on a Unix socket in a temporary
folder, no TCP port) and stopped after the module; the tests skip, saying why, only where it cannot start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from sbert.errors import IndexExistsError, IndexFormatError, IndexMismatchError

pytestmark = pytest.mark.slow  # starts a database server

pytest.importorskip("psycopg", reason="needs the sbert[pgvector] extra (psycopg)")
pytest.importorskip("pgvector", reason="needs the sbert[pgvector] extra (pgvector)")

from sbert.search.index import postgres as pgvector  # noqa: E402
from sbert.search.index.postgres import DatabaseError, PgVectorIndex  # noqa: E402
from sbert.search.retrieve import open_index  # noqa: E402

PYTHON = sys.executable


@pytest.fixture(scope="module")
def url():
    pgserver = pytest.importorskip("pgserver", reason="needs the sbert[pgvector] extra (pgserver)")
    folder = Path(tempfile.mkdtemp(prefix="sbert-pgdata-"))  # not under pytest's root-only folders: the server
    try:  # runs as another user when the tests run as root
        server = pgserver.get_server(folder, cleanup_mode="delete")
    except Exception as err:  # any failure to start is a reason to skip, stated
        pytest.skip(f"cannot start PostgreSQL with pgvector through pgserver: {err}")
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def table(request) -> str:
    return "t_" + request.node.name.removeprefix("test_")[:50].replace("[", "_").replace("]", "")


def unit(n: int, dim: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_build_search_add_delete_round_trip(url, table):
    x = unit(50, 8)
    texts = [f"text {i}" for i in range(50)]
    index = PgVectorIndex.build(url, x * 3, model="default", table=table, texts=texts, backend="torch/fp32")
    assert (len(index), index.dim, index.model, index.backend) == (50, 8, "all-MiniLM-L6-v2", "torch/fp32")
    assert index.ids == [str(i) for i in range(50)] and index.texts == texts
    for method in ("hnsw", "exact"):
        hits = index.search(x[[3, 7]], 5, method=method)
        expected = np.sort(x[[3, 7]] @ x.T, axis=1)[:, ::-1][:, :5]  # vectors were stored normalised
        assert [h[0].id for h in hits] == ["3", "7"] and hits[0][0].text == "text 3"
        np.testing.assert_allclose([[h.score for h in row] for row in hits], expected, atol=1e-5)
    index.add(x[:2], texts=["a", "b"], backend="torch/fp32")
    assert index.ids[-2:] == ["50", "51"] and len(index) == 52
    assert index.delete(["0", "51"]) == 2 and len(index) == 50
    with pytest.raises(KeyError, match="nope"):
        index.delete(["1", "nope"])
    assert "1" in PgVectorIndex.open(url, table).ids  # the failed delete deleted nothing
    again = open_index(f"{url}#{table}")
    assert isinstance(again, PgVectorIndex) and again.ids == index.ids
    assert again.search(x[:1], 1)[0][0].id == "50"  # the copy of row 0 added under a new id
    with pytest.raises(ValueError, match="unique"):
        index.add(x[:1], ids=["5"])


def test_dot_metric_scores_are_dot_products(url, table):
    x = np.random.default_rng(1).standard_normal((30, 6)).astype(np.float32)
    index = PgVectorIndex.build(url, x, model="default", table=table, metric="dot")
    hits = index.search(x[:2], 3, method="exact")
    expected = np.sort(x[:2] @ x.T, axis=1)[:, ::-1][:, :3]
    np.testing.assert_allclose([[h.score for h in row] for row in hits], expected, rtol=1e-5, atol=1e-5)


def test_hnsw_recall_at_10_against_brute_force_on_20000_unit_vectors(url, table):
    """20,000 random unit vectors of width 64 (random vectors are harder for HNSW than embeddings). Measured
    with m 16, ef_construction 64: recall@10 0.87 at ef_search 100, 0.96 at 200, 0.998 at 400."""
    x, queries = unit(20_000, 64, seed=2), unit(100, 64, seed=3)
    index = PgVectorIndex.build(url, x, model="default", table=table, hnsw_m=16, ef_construction=64, ef_search=400)
    truth = np.argsort(-(queries @ x.T), axis=1)[:, :10]
    found = [[int(h.id) for h in row] for row in index.search(queries, 10)]
    recall = np.mean([len(set(f) & set(t.tolist())) / 10 for f, t in zip(found, truth, strict=True)])
    assert recall >= 0.95, recall


def test_model_width_and_precision_mismatches_are_refused(url, table):
    index = PgVectorIndex.build(url, unit(10, 8), model="default", table=table, backend="torch/fp32")
    opened = PgVectorIndex.open(url, table)
    opened.check_model("default", 8)
    with pytest.raises(IndexMismatchError, match="all-MiniLM-L6-v2"):
        opened.check_model("some-other-model")
    with pytest.raises(IndexMismatchError, match="8"):
        opened.check_model("default", 384)
    with pytest.raises(IndexMismatchError, match="8-dim"):
        opened.search(unit(1, 16), 3)
    with pytest.raises(IndexMismatchError, match="8-dim"):
        opened.add(unit(1, 16))
    with pytest.raises(IndexMismatchError, match="onnx/int8"):
        opened.add(unit(1, 8), backend="onnx/int8")
    with pytest.raises(IndexExistsError, match="already holds"):
        PgVectorIndex.build(url, unit(3, 4), model="default", table=table)
    PgVectorIndex.build(url, unit(3, 4), model="default", table=table, overwrite=True)
    assert len(PgVectorIndex.open(url, table)) == 3 and len(index) == 3  # the old handle sees the new rows
    with pytest.raises(IndexFormatError, match="no sbert index in table 'absent'"):
        PgVectorIndex.open(url, "absent")


def test_a_table_that_is_not_an_index_is_never_replaced(url, table):
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(f"CREATE TABLE {table} (x int)")
    with pytest.raises(IndexExistsError, match="not an sbert index"):
        PgVectorIndex.build(url, unit(3, 4), model="default", table=table, overwrite=True)
    with pytest.raises(ValueError, match="table name"):
        PgVectorIndex.open(url, "bad; DROP TABLE x")


def test_a_failed_read_leaves_the_connection_usable(url, table):
    import psycopg

    index = PgVectorIndex.build(url, unit(3, 4), model="default", table=table)
    with psycopg.connect(url) as conn:
        conn.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    with pytest.raises(psycopg.errors.UndefinedTable):
        len(index)
    with psycopg.connect(url) as conn:
        conn.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    assert len(index) == 3 and index.search(unit(1, 4), 2)[0][0].id in {"0", "1", "2"}


def test_bad_urls_name_host_port_and_database(url, tmp_path):
    missing = tmp_path / "no-server-here"
    with pytest.raises(DatabaseError, match=f"{missing}:5433/sbert"):
        PgVectorIndex.open(f"postgresql://postgres@/sbert?host={missing}&port=5433")
    with pytest.raises(DatabaseError, match="/no_such_db"):
        PgVectorIndex.open(url.replace("/postgres?", "/no_such_db?"))
    with pytest.raises(DatabaseError, match="cannot connect"):
        PgVectorIndex.open("postgresql://nobody@127.0.0.1:1/x?connect_timeout=2")


_WRITER = """
import sys, numpy as np
from sbert.search.index.postgres import PgVectorIndex
index = PgVectorIndex.open(sys.argv[1], sys.argv[2])
rng = np.random.default_rng(int(sys.argv[3]))
for _ in range(10):
    index.add(rng.standard_normal((20, 8)).astype(np.float32), texts=[sys.argv[3]] * 20)
"""


def test_two_writer_processes_at_once_lose_nothing(url, table):
    PgVectorIndex.build(url, unit(5, 8), model="default", table=table)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    writers = [subprocess.Popen([PYTHON, "-c", _WRITER, url, table, seed], env=env) for seed in ("1", "2")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    index = PgVectorIndex.open(url, table)
    assert len(index) == 5 + 2 * 10 * 20
    assert sorted(index.ids, key=int) == [str(i) for i in range(405)]  # numbered under the lock: no clash, no gap
    assert index.texts.count("1") == index.texts.count("2") == 200


_KILLED = """
import sys, time, numpy as np
import sbert.search.index.postgres as pg
def stall(*args):  # rows written, transaction still open: wait to be killed
    print("written", flush=True)
    time.sleep(600)
pg._touch = stall
index = pg.PgVectorIndex.open(sys.argv[1], sys.argv[2])
index.add(np.ones((1000, 8), dtype=np.float32), ids=[f"k{i}" for i in range(1000)])
"""


def test_a_writer_killed_mid_transaction_leaves_the_table_as_it_was(url, table):
    PgVectorIndex.build(url, unit(5, 8), model="default", table=table)
    child = subprocess.Popen([PYTHON, "-c", _KILLED, url, table], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
    finally:
        child.kill()
        child.wait(timeout=30)
    index = PgVectorIndex.open(url, table)
    assert len(index) == 5 and not any(i.startswith("k") for i in index.ids)
    start = time.monotonic()
    index.add(unit(2, 8))  # the dead writer's lock is gone: this write does not wait for it
    assert len(index) == 7 and time.monotonic() - start < 30


def _debian_postgres() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return found[-1].parent if found else None


@pytest.mark.skipif(_debian_postgres() is None, reason="needs Debian's postgresql (a server without pgvector)")
def test_a_server_without_pgvector_says_how_to_install_it():
    """Debian's PostgreSQL on these machines has no pgvector: a real server lacking the extension."""
    bin_dir = _debian_postgres()
    folder = Path(tempfile.mkdtemp(prefix="sbert-pg-"))
    user = "postgres" if os.geteuid() == 0 else None
    if user:
        shutil.chown(folder, user)
    run = {"user": user, "check": True, "capture_output": True, "timeout": 60}
    try:
        subprocess.run([bin_dir / "initdb", "-D", folder / "data", "-U", "postgres", "--auth=trust"], **run)
        options = f"-h '' -k {folder} -c listen_addresses=''"
        ctl = [bin_dir / "pg_ctl", "-D", folder / "data", "-w", "-o", options, "-l", folder / "log"]
        subprocess.run([*ctl, "start"], **run)
        with pytest.raises(DatabaseError, match=r"no pgvector extension.*install"):
            PgVectorIndex.build(f"postgresql://postgres@/postgres?host={folder}", unit(3, 4), model="default")
    finally:
        subprocess.run([bin_dir / "pg_ctl", "-D", folder / "data", "-m", "immediate", "stop"], user=user, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def test_cli_build_add_search_delete_on_a_tiny_corpus(url, table, tmp_path):
    from click.testing import CliRunner

    from sbert.cli import main as cli

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("A man is playing a guitar.\nThe cat sleeps on the sofa.\nStocks fell sharply today.\n")
    more = tmp_path / "more.txt"
    more.write_text("A kitten naps on a couch.\n")
    location = f"{url}#{table}"
    runner = CliRunner()

    def ok(*args: str) -> str:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    ok("index", "build", str(corpus), "--db", url, "--table", table)
    assert "already holds" in runner.invoke(cli, ["index", "build", str(corpus), "--out", location]).output
    ok("index", "add", location, str(more))
    found = ok("search", location, "a cat resting on furniture", "-k", "2", "--json")
    import json

    hits = json.loads(found[found.index("[") :])[0]["hits"]
    assert {h["id"] for h in hits} == {"1", "3"}  # the two sentences about a cat
    ok("index", "delete", location, "3")
    assert PgVectorIndex.open(url, table).ids == ["0", "1", "2"]
    info = ok("index", "info", url, "--table", table, "--json")
    assert '"rows": 3' in info
    refused = runner.invoke(cli, ["index", "build", str(corpus), "--db", url, "--table", "x", "--bm25"])
    assert refused.exit_code != 0 and "--bm25 applies to a folder index" in refused.output


def test_the_service_searches_an_index_in_postgresql(url, table, model):
    pytest.importorskip("fastapi", reason="needs the sbert[serve] extra")
    from fastapi.testclient import TestClient

    from sbert.serve.app import create_app
    from sbert.serve.settings import EngineSettings

    texts = ["Bread is baked in an oven.", "The stock market fell.", "A cat sleeps on the sofa."]
    PgVectorIndex.build(url, model.encode(texts), model="default", table=table, texts=texts, backend=model.runtime)
    index = open_index(url, table=table)
    index.check_model("default", model.dim)
    app = create_app(model, model_name="default", index=index, engine=EngineSettings(workers=1, max_wait_ms=1))
    with TestClient(app) as client:
        found = client.post("/search", json={"query": "how to bake bread", "k": 2}).json()["results"][0]["hits"]
        assert [h["text"] for h in found][:1] == [texts[0]] and len(found) == 2
        assert client.get("/info").json()["index"]["size"] == 3
        assert client.post("/search", json={"query": "x", "method": "int8"}).status_code == 400


def test_a_search_does_not_wait_for_another_threads_connection(url, table):
    """Searches from several threads (the service's) run side by side on the pool's connections."""
    import threading

    index = PgVectorIndex.build(url, unit(50, 4), model="default", table=table)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with index._session() as conn:  # another thread's call, still running
            conn.execute("SELECT 1")
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(30)
        hits = index.search(unit(1, 4), 3)[0]
        assert len(hits) == 3 and not release.is_set()  # answered while the other connection is busy
    finally:
        release.set()
        thread.join()
    index.close()


def _tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def test_searches_during_a_rebuild_read_the_old_index_until_the_swap(url, table, monkeypatch):
    """A rebuild in the main thread, a thread searching all along: every search answers at once, from the old
    index until the swap and from the new one after; no table is left behind, and a failed rebuild changes
    nothing. The real HNSW graph is built, then the build is held open (as a long one is) until 5 searches
    have run in that state."""
    import threading

    import sbert.search.index.postgres as pg

    old, new = unit(2000, 16, seed=4), unit(2000, 16, seed=5)
    index = PgVectorIndex.build(url, old, model="default", table=table, ids=[f"old{i}" for i in range(2000)])
    tables = _tables(url)
    built, searched, stop = threading.Event(), threading.Event(), threading.Event()
    real_hnsw = pg._create_hnsw

    def held_hnsw(*args) -> None:
        real_hnsw(*args)
        built.set()
        searched.wait(20)

    monkeypatch.setattr(pg, "_create_hnsw", held_hnsw)
    seen: list[tuple[float, str, bool]] = []  # (seconds, top hit's id, whether the build was held meanwhile)

    def search() -> None:
        while not stop.is_set():
            held, start = built.is_set() and not searched.is_set(), time.monotonic()
            top = index.search(new[:1], 1)[0][0].id
            seen.append((time.monotonic() - start, top, held))
            if sum(was_held for _, _, was_held in seen) >= 5:
                searched.set()

    searcher = threading.Thread(target=search)
    searcher.start()
    try:
        PgVectorIndex.build(
            url, new, model="default", table=table, ids=[f"new{i}" for i in range(2000)], overwrite=True
        )
    finally:
        stop.set()
        searcher.join(60)
    during = [top for _, top, held in seen if held]
    assert len(during) >= 5 and all(top.startswith("old") for top in during), seen
    tops = [top[:3] for _, top, _ in seen]
    assert tops == sorted(tops, key=lambda t: t == "new"), tops  # old ones, then new ones: never back
    assert max(seconds for seconds, _, _ in seen) < 5, seen
    assert index.search(new[:1], 1)[0][0].id == "new0" and len(index) == 2000
    assert _tables(url) == tables  # the build's table was renamed into place: nothing else is left

    def failing_hnsw(*args) -> None:
        raise RuntimeError("the build fails")

    monkeypatch.setattr(pg, "_create_hnsw", failing_hnsw)
    with pytest.raises(RuntimeError, match="the build fails"):
        PgVectorIndex.build(url, old, model="default", table=table, overwrite=True)
    assert index.search(new[:1], 1)[0][0].id == "new0" and _tables(url) == tables


_KILLED_BUILD = """
import sys, time, numpy as np
import sbert.search.index.postgres as pg
real = pg._create_hnsw
def stall(*args):  # rows and graph written, transaction still open: wait to be killed
    real(*args)
    print("built", flush=True)
    time.sleep(600)
pg._create_hnsw = stall
x = np.random.default_rng(9).standard_normal((500, 8)).astype(np.float32)
ids = [f"k{i}" for i in range(500)]
pg.PgVectorIndex.build(sys.argv[1], x, model="default", table=sys.argv[2], overwrite=True, ids=ids)
"""


def test_a_rebuild_killed_before_its_swap_leaves_the_old_index_and_no_table(url, table):
    from concurrent.futures import ThreadPoolExecutor

    index = PgVectorIndex.build(url, unit(50, 8), model="default", table=table)
    tables = _tables(url)
    child = subprocess.Popen([PYTHON, "-c", _KILLED_BUILD, url, table], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "built"
        with ThreadPoolExecutor(1) as pool:  # the old index answers while the new one waits to be swapped in
            hits = pool.submit(index.search, unit(1, 8), 3).result(timeout=10)[0]
        assert len(hits) == 3 and all(not h.id.startswith("k") for h in hits)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert len(PgVectorIndex.open(url, table)) == 50 and not any(i.startswith("k") for i in index.ids)
    assert _tables(url) == tables  # the dead build's table went with its transaction


def test_a_database_that_is_down_answers_503_promptly_naming_it(model):
    """The service's /search and the library's search, on a server that was stopped after opening."""
    pgserver = pytest.importorskip("pgserver", reason="needs the sbert[pgvector] extra (pgserver)")
    pytest.importorskip("fastapi", reason="needs the sbert[serve] extra")
    from fastapi.testclient import TestClient

    from sbert.errors import IndexUnavailableError
    from sbert.search.index.postgres import DatabaseUnavailableError
    from sbert.serve.app import create_app
    from sbert.serve.settings import EngineSettings

    folder = Path(tempfile.mkdtemp(prefix="sbert-pgdown-"))
    try:
        server = pgserver.get_server(folder, cleanup_mode="delete")
    except Exception as err:
        pytest.skip(f"cannot start PostgreSQL with pgvector through pgserver: {err}")
    try:
        url = server.get_uri().replace("postgres:@", "postgres:hunter2@")  # trust auth: the password is unused
        url += ("&" if "?" in url else "?") + "connect_timeout=2"  # calls wait 2 s for a connection, not 5
        texts = ["Bread is baked in an oven.", "The stock market fell."]
        PgVectorIndex.build(url, model.encode(texts), model="default", table="down", texts=texts)
        index = open_index(url, table="down")
    finally:
        server.cleanup()  # the database stops
    app = create_app(model, model_name="default", index=index, engine=EngineSettings(workers=1, max_wait_ms=1))
    with TestClient(app) as client:
        start = time.monotonic()
        answer = client.post("/search", json={"query": "how to bake bread", "k": 2})
        assert answer.status_code == 503 and time.monotonic() - start < 15
        error = answer.json()["error"]
        assert f"{folder}:5432/postgres#down" in error["message"] and "hunter2" not in error["message"]
        assert error["code"] == "index_unavailable" and error["type"] == "server_error"
    start = time.monotonic()
    with pytest.raises(DatabaseUnavailableError, match="no connection to PostgreSQL within 2 s") as caught:
        index.search(model.encode(["bread"]), 1)
    assert time.monotonic() - start < 15 and isinstance(caught.value, IndexUnavailableError | DatabaseError)
    with pytest.raises(DatabaseUnavailableError, match=f"cannot connect to PostgreSQL at {folder}:5432/postgres"):
        PgVectorIndex.open(url, "down")
    index.close()
    shutil.rmtree(folder, ignore_errors=True)


def test_repeated_ids_are_named(url, table):
    with pytest.raises(ValueError, match=r"repeated: \['b'\]"):
        PgVectorIndex.build(url, unit(3, 4), model="default", table=table, ids=["a", "b", "b"])
    index = PgVectorIndex.build(url, unit(2, 4), model="default", table=table)
    with pytest.raises(ValueError, match=r"repeated: \['x'\]"):
        index.add(unit(2, 4), ids=["x", "x"])


@pytest.mark.parametrize(
    ("query", "seconds"),
    [("", 5.0), ("?connect_timeout=30", 30.0), ("?connect_timeout=1", 2.0), ("?connect_timeout=0", 5.0)],
)
def test_a_call_waits_for_a_connection_as_long_as_the_url_lets_one_attempt_take(query, seconds):
    """The pool's wait follows the URL's connect_timeout (libpq's floor of 2 s; 0 is libpq's "for ever": the
    default then), so a slow network's 30 s attempt is not cut short at 5 s."""
    assert pgvector._pool_timeout(f"postgresql://me@dbhost:5432/search{query}") == seconds
    assert pgvector._connect_options(f"postgresql://me@dbhost/search{query}") == (
        {} if query else {"connect_timeout": pgvector.CONNECT_TIMEOUT}
    )


def test_a_database_index_records_its_adapter_and_refuses_another(url, table, tmp_path):
    pytest.importorskip("peft")
    import torch
    from conftest import make_tiny_encoder

    import sbert
    from sbert.adapters import LoraSettings, adapter_record, add_lora
    from sbert.errors import IndexMismatchError

    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    for seed, name in enumerate(("tracker-a", "tracker-b"), start=1):
        encoder = add_lora(sbert.load(base, device="cpu"), LoraSettings(rank=2), str(base))
        with torch.no_grad():  # B matrices random, as if trained: the two adapters differ
            for key, param in encoder.named_parameters():
                if "lora_B" in key:
                    param.copy_(torch.randn(param.shape, generator=torch.Generator().manual_seed(seed)) * 0.05)
        encoder.save(tmp_path / name)
    vectors = sbert.load(tmp_path / "tracker-a", device="cpu").encode(["a", "b"])
    PgVectorIndex.build(url, vectors, model=str(tmp_path / "tracker-a"), table=table)
    index = open_index(f"{url}#{table}")
    assert index.manifest["adapter"] == adapter_record(tmp_path / "tracker-a")
    index.check_model(tmp_path / "tracker-a", vectors.shape[1])
    for other, words in ((tmp_path / "tracker-b", "'tracker-b'"), (base, "no adapter")):
        with pytest.raises(IndexMismatchError, match=words):
            index.check_model(other)
    plain = PgVectorIndex.build(url, unit(2, vectors.shape[1]), model="default", table=table + "_plain")
    assert "adapter" not in plain.manifest
    with pgvector._connect(url) as conn:  # the table as an older sbert made it: no adapter column
        conn.execute("ALTER TABLE sbert_indexes DROP COLUMN adapter")
    assert PgVectorIndex.open(url, table + "_plain").manifest["model"] == "all-MiniLM-L6-v2"
    PgVectorIndex.build(url, vectors, model=str(tmp_path / "tracker-a"), table=table, overwrite=True)  # adds it back
    assert open_index(f"{url}#{table}").manifest["adapter"]["name"] == "tracker-a"
