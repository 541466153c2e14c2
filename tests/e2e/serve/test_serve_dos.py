"""Availability of the service against clients that hold it up: a body dripped a byte at a time, huge
headers, bodies of millions of tiny values, requests abandoned mid-way, and an open server by mistake.
Real sockets against ``sbert serve``'s server (``make_server``) on loopback."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from test_serve import free_port  # noqa: E402

from sbert.serve.app import create_app  # noqa: E402
from sbert.serve.auth import BadApiKeyError  # noqa: E402
from sbert.serve.settings import Connections, EngineSettings  # noqa: E402

KEY = "dos-test-key"
CONNECTIONS = Connections(
    header_timeout=2.0, read_timeout=2.0, body_timeout=3.0, keep_alive=5.0, max_connections=4, max_header_bytes=8192
)


def run_server(app, connections: Connections) -> tuple[int, object, threading.Thread]:
    from sbert.serve import bind, make_server

    sock = bind("127.0.0.1", free_port())
    server = make_server(app, sock=sock, graceful_seconds=5, connections=connections)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return sock.getsockname()[1], server, thread


LOOP_THREADS: dict[int, threading.Thread] = {}  # port -> the thread running that server's event loop


@pytest.fixture(scope="module")
def guarded(model) -> Iterator[int]:
    """A keyed server with short time-outs, 8 KiB of headers and a cap of 4 connections."""
    port, server, thread = run_server(create_app(model, model_name="default", api_key=KEY), CONNECTIONS)
    LOOP_THREADS[port] = thread
    yield port
    server.should_exit = True
    thread.join(timeout=30)


def head(length: int, key: str | None = KEY, extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (
        f"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}{extra}"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def drip(port: int, key: str | None = KEY, every: float = 1.0, at_most: float = 15.0) -> tuple[float, bytes]:
    """Send the headers of a 1,000-byte body, then one byte of it every ``every`` seconds (under the read
    time-out); seconds until the server closes the connection, and what it said."""
    began, said = time.monotonic(), b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head(1000, key) + b'{"input": "')
        while time.monotonic() - began < at_most:
            readable, _, _ = select.select([conn], [], [], every)
            if readable:
                chunk = conn.recv(65536)
                if not chunk:
                    return time.monotonic() - began, said
                said += chunk
                continue
            try:
                conn.sendall(b"a")
            except OSError:
                break
    return time.monotonic() - began, said


def good_request(port: int) -> int:
    headers = {"Authorization": f"Bearer {KEY}"}
    return httpx.post(
        f"http://127.0.0.1:{port}/v1/embeddings", json={"input": "hi"}, headers=headers, timeout=30
    ).status_code


# -- a body dripped a byte at a time -------------------------------------------------------------------------
def test_a_dripped_body_is_cut_at_the_body_time_limit(guarded):
    """Each byte comes within the 2 s read time-out, but the whole body must arrive within 3 s."""
    seconds, said = drip(guarded)
    assert said.startswith(b"HTTP/1.1 408"), said[:200]
    assert b"--body-timeout" in said and b"whole body" in said
    assert CONNECTIONS.body_timeout - 0.5 < seconds < CONNECTIONS.body_timeout + 4


def test_a_refused_request_closes_its_connection_without_waiting_for_its_body(guarded):
    """Without a key: 401 at once, and the connection closed then, not held while the client drips."""
    seconds, said = drip(guarded, key=None)
    assert said.startswith(b"HTTP/1.1 401"), said[:200]
    assert b"connection: close" in said.lower()
    assert seconds < 1.5  # closed before the next byte would have been sent


def test_drippers_hold_the_connection_cap_no_longer_than_the_body_time_limit(guarded):
    """Three drippers and the test's own request fill the cap of 4 (503); the drippers go on dripping, but
    once the body time limit has cut them, requests are served again."""
    drippers = [
        threading.Thread(target=drip, args=(guarded,), kwargs={"at_most": 20.0})
        for _ in range(CONNECTIONS.max_connections - 1)
    ]
    began = time.monotonic()
    for thread in drippers:
        thread.start()
    time.sleep(0.5)
    try:
        assert good_request(guarded) == 503
        time.sleep(max(0.0, began + CONNECTIONS.body_timeout + 2.0 - time.monotonic()))
        assert good_request(guarded) == 200  # the drippers would still be dripping, were they not cut
    finally:
        for thread in drippers:
            thread.join(timeout=30)


# -- headers -------------------------------------------------------------------------------------------------
def test_headers_over_the_limit_get_431_and_are_not_read_further(guarded):
    """A 4 MiB header (sent in pieces) is refused once 8 KiB have come; headers under the limit are served,
    and so are headers that come with a body larger than the limit in one piece (the body is not counted)."""
    began, said = time.monotonic(), b""
    with socket.create_connection(("127.0.0.1", guarded), timeout=30) as conn:
        try:
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            for _ in range(64):
                conn.sendall(b"a" * 65536)
        except OSError:  # the server closed the connection: it read no more
            pass
        try:
            while chunk := conn.recv(65536):
                said += chunk
        except ConnectionResetError:
            pass
    assert said.startswith(b"HTTP/1.1 431"), said[:200]
    assert b"8192 bytes" in said and b"--max-header-kb" in said
    assert time.monotonic() - began < 10
    fine = {"Authorization": f"Bearer {KEY}", "X-Fine": "b" * 6000}
    assert httpx.get(f"http://127.0.0.1:{guarded}/info", headers=fine, timeout=30).status_code == 200
    body = json.dumps({"input": "x" * 30_000}).encode()
    with socket.create_connection(("127.0.0.1", guarded), timeout=30) as conn:
        conn.sendall(head(len(body), extra="Connection: close\r\n") + body)
        said = b""
        while chunk := conn.recv(65536):
            said += chunk
    assert said.startswith(b"HTTP/1.1 200"), said[:200]


# -- bodies of millions of tiny values -----------------------------------------------------------------------
def test_a_body_of_millions_of_empty_arrays_is_refused_before_parsing(guarded):
    """4 million ``[]`` (12 MB, under the body limit) are refused by their count, before any is built; the
    server goes on answering meanwhile."""
    body = b'{"input": [' + b"[]," * 4_000_000 + b"[]]}"
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    url = f"http://127.0.0.1:{guarded}"
    slowest = []

    def probe(stop: threading.Event) -> None:
        while not stop.is_set():
            began = time.monotonic()
            httpx.get(url + "/health", timeout=30)
            slowest.append(time.monotonic() - began)
            time.sleep(0.05)

    stop = threading.Event()
    prober = threading.Thread(target=probe, args=(stop,))
    prober.start()
    try:
        refused = httpx.post(url + "/v1/embeddings", content=body, headers=headers, timeout=60)
    finally:
        stop.set()
        prober.join()
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "too_many_values" and "4160" in error["message"] and "--max-inputs" in error["message"]
    assert max(slowest) < 1.0, slowest


def test_a_body_of_many_strings_is_refused_by_its_count_and_texts_with_commas_are_not(guarded):
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    url = f"http://127.0.0.1:{guarded}/v1/embeddings"
    strings = httpx.post(url, content=json.dumps({"input": [""] * 100_000}), headers=headers, timeout=60)
    assert strings.status_code == 400 and strings.json()["error"]["code"] == "too_many_values"
    commas = ["a, b, [c], {d}, " * 400, 'quoted "x, y", \\ and [more]']  # 8,000 commas and brackets in texts
    fine = httpx.post(url, json={"input": commas}, headers=headers, timeout=60)
    assert fine.status_code == 200 and len(fine.json()["data"]) == 2


def test_bodies_are_parsed_off_the_event_loop(guarded, monkeypatch):
    import sbert.serve.routes as routes

    threads = []
    parse = routes.parse

    def recorded(*args):
        threads.append(threading.current_thread())
        return parse(*args)

    monkeypatch.setattr(routes, "parse", recorded)
    assert good_request(guarded) == 200
    assert threads and threads[0] is not LOOP_THREADS[guarded]  # the server's event loop runs in that thread


# -- requests abandoned by their clients ---------------------------------------------------------------------
class Slow:
    """The default model, each text taking 10 ms more to embed: a request of many texts takes a while."""

    def __init__(self, model) -> None:
        self.model, self.embedded = model, 0

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def encode_tokenized(self, tokens, **options):
        time.sleep(0.01 * len(tokens))
        self.embedded += len(tokens)
        return self.model.encode_tokenized(tokens, **options)


@pytest.fixture(scope="module")
def slow_server(model) -> Iterator[tuple[int, Slow]]:
    slow = Slow(model)
    engine = EngineSettings(max_batch_texts=16, max_wait_ms=1, workers=1)
    app = create_app(slow, model_name="default", engine=engine)
    port, server, thread = run_server(app, Connections())
    yield port, slow
    server.should_exit = True
    thread.join(timeout=30)


def test_a_request_whose_client_went_away_is_cancelled(slow_server):
    """Two requests of 1,000 texts (10 s of model time each) whose clients leave after a second stop within a
    model call of 16 texts: the next client is answered at once, not after them."""
    port, slow = slow_server
    body = json.dumps({"input": [f"text number {i} of many" for i in range(1000)]}).encode()
    request = head(len(body), key=None) + body
    clients = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
    for conn in clients:
        conn.sendall(request)
    time.sleep(1.0)
    for conn in clients:
        conn.close()
    time.sleep(0.5)
    began = time.monotonic()
    answer = httpx.post(f"http://127.0.0.1:{port}/v1/embeddings", json={"input": "still here"}, timeout=60)
    assert answer.status_code == 200
    assert time.monotonic() - began < 3.0
    time.sleep(1.0)
    assert slow.embedded < 300, slow.embedded  # of the 2,001 texts sent, about a second's worth was embedded
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    assert 'sbert_requests_total{endpoint="/v1/embeddings",status="499"} 2.0' in metrics


def test_a_short_request_merged_with_a_long_one_is_answered_first_and_the_long_one_stops_when_cancelled():
    """A request of 2 texts and one of 1,000 (10 s of model time) merged into its batch: the short one is
    answered after the first model call, not after the long one, and cancelling the long one stops its calls."""
    import asyncio

    import numpy as np

    from sbert.serve.merging import DynamicBatcher

    embedded = []

    def encode(texts):
        time.sleep(0.01 * len(texts))
        embedded.extend(texts)
        return np.array([[len(t)] for t in texts], dtype=np.float32)

    batcher = DynamicBatcher(encode, max_batch_texts=16, max_wait_ms=200)

    async def merged():
        began = asyncio.get_running_loop().time()
        short = asyncio.ensure_future(batcher.embed(["a", "bb"]))
        await asyncio.sleep(0.01)  # within the batch's wait: the long one joins the short one's batch
        long = asyncio.ensure_future(batcher.embed([f"long {i}" for i in range(1000)]))
        short = await short
        waited = asyncio.get_running_loop().time() - began
        await asyncio.sleep(0.5)
        long.cancel()
        await asyncio.sleep(0.5)
        return short, waited

    short, waited = asyncio.run(merged())
    stopped_at = len(embedded)
    time.sleep(0.5)
    batcher.close()
    assert short[:, 0].tolist() == [1, 2] and waited < 1.0, waited
    assert len(embedded) == stopped_at < 200, len(embedded)  # of the 1,002 texts, about a second's worth


# -- API keys and open servers -------------------------------------------------------------------------------
def test_an_empty_api_key_is_refused(model):
    with pytest.raises(BadApiKeyError, match="empty"):
        create_app(model, model_name="default", api_key="")


def startup_log(host: str) -> str:
    """What ``sbert serve --host HOST`` (no key) says on stderr until it listens."""
    port = free_port()
    sbert_cli = Path(sys.executable).with_name("sbert")
    env = {k: v for k, v in os.environ.items() if k != "SBERT_API_KEY"}
    command = [str(sbert_cli), "serve", "--host", host, "--port", str(port)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    said = []
    try:
        for line in process.stderr:
            said.append(line)
            if "Application startup complete" in line or "Traceback" in line:
                break
    finally:
        process.terminate()
        process.wait(timeout=60)
    return "".join(said)


@pytest.mark.slow
def test_a_keyless_server_beyond_loopback_warns():
    beyond, loopback = startup_log("0.0.0.0"), startup_log("127.0.0.1")
    assert "listening on" in beyond and "listening on" in loopback, beyond + loopback
    assert "serving on 0.0.0.0 without an API key" in beyond and "--api-key" in beyond
    assert "without an API key" not in loopback
