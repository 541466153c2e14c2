"""A bounded load test of ``sbert serve`` on loopback, against the library's own encode throughput.

The server runs in its own process (``sbert serve``, default model, torch backend). 32 concurrent
clients (asyncio + aiohttp where installed, else httpx, or as --client says; one process) send the STSb
test sentences to /v1/embeddings, a fixed number of requests each run, under a time limit. Reported: errors,
requests/s, sentences/s, latency p50/p99, CPU use, and sentences/s as a share of the library's own
rate on the same sentences (``encode(sentences)``, batch 32, smart batching, one call, server idle);
also sentences per server CPU-second against the library's per CPU-second. The load generator
shares the machine's cores with the server.

With ``--malformed FRACTION`` it runs the robustness mix instead: for ``--time-limit`` seconds the
clients send good requests (8 sentences each, whose vectors are checked against the library's) and,
that share of the time, malformed ones (a lone surrogate or an empty string among good texts, bad
JSON, a 5,000-digit ``dimensions``, 200,000 nested ``[``, a million empty arrays, an unknown model) and
oversized ones (a /search of 2,048 queries × k 1,000 and a 2,048 × 2,048 /similarity: small requests
asking for huge answers, against an index of the sentences the run builds). Meanwhile connections that
hold the server up, each kind a few at a time: ``--half-open`` send half a request line and stop (each
should get 408 from the header time-out), ``--drippers`` send a body a byte every 25 s (408 from the
body time-out), ``--big-headers`` send a 1 MiB header (431), and ``--abandoned`` send a /similarity of
1,000 texts of 8,000 characters and leave after 2 s (the server should cancel it: 499 in /metrics).
Reported per kind: requests sent, 2xx, 4xx, 5xx, dropped connections, and whether each got the status it
should; and the server process's peak memory (VmHWM). ``--url`` load-tests a server that is already
running instead of starting one.

    python -m benchmarks.serve_load [--clients 32] [--passes 3] [--per-request 8,1] [--time-limit 180]
                                    [--server-packing auto|on|off] [--server-workers N]
    python -m benchmarks.serve_load --malformed 0.3 --time-limit 45   # -> results/serve_load_malformed.md
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import importlib.util
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import numpy as np
import orjson
import torch

import sbert
from benchmarks.lib import environment_lines, markdown_table, write_result
from benchmarks.lib.children import ends_with_parent
from benchmarks.lib.sentences import stsb_test_sentences
from sbert.data.paths import data_dir

FORMAT = "base64"  # what the official openai client asks for by default


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, backend: str, max_wait_ms: float, extra: list[str]) -> subprocess.Popen:
    sbert_cli = Path(sys.executable).with_name("sbert")
    command = [str(sbert_cli), "serve", "--port", str(port), "--backend", backend, "--max-inputs", "4096"]
    command += ["--max-wait-ms", str(max_wait_ms), *extra]
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (kept by the server) not a pipe: a full one nobody reads stalls it
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True, preexec_fn=ends_with_parent())
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.5)
    process.kill()
    log.seek(0)
    raise RuntimeError("the server did not start: " + log.read())


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds used so far by process ``pid`` (default: this one)."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batch_totals(port: int) -> tuple[float, float]:
    """(texts, batches) the server has run so far, from its /metrics."""
    totals = {}
    for line in httpx.get(f"http://127.0.0.1:{port}/metrics").text.splitlines():
        if line.startswith(("sbert_batch_texts_sum", "sbert_batch_texts_count")):
            name, value = line.rsplit(" ", 1)
            totals[name] = float(value)
    return totals.get("sbert_batch_texts_sum", 0.0), totals.get("sbert_batch_texts_count", 0.0)


Post = Callable[..., Awaitable[tuple[int, bytes]]]  # post(body, url=the client's) -> (status, raw body)


def client_failures() -> tuple[type[BaseException], ...]:
    """What a request that got no HTTP answer raises (a dropped connection, a timeout)."""
    try:
        import aiohttp
    except ImportError:  # --client httpx needs no aiohttp
        return TimeoutError, OSError, httpx.HTTPError
    return TimeoutError, OSError, httpx.HTTPError, aiohttp.ClientError


@asynccontextmanager
async def open_client(url: str, clients: int, client: str) -> AsyncIterator[Post]:
    """``post(body) -> (status, raw body)`` to ``url`` over up to ``clients`` keep-alive connections."""
    headers = {"Content-Type": "application/json"}
    if client == "aiohttp":
        import aiohttp

        connector = aiohttp.TCPConnector(limit=clients)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as http:

            async def post(body: bytes, target: str = url) -> tuple[int, bytes]:
                async with http.post(target, data=body, headers=headers) as response:
                    return response.status, await response.read()

            yield post
    else:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(limits=limits, timeout=60) as http:

            async def post(body: bytes, target: str = url) -> tuple[int, bytes]:
                response = await http.post(target, content=body, headers=headers)
                return response.status_code, response.content

            yield post


async def load(
    url: str,
    payloads: list[list[str]],
    clients: int,
    time_limit: float,
    client: str = "aiohttp",
    models: tuple[str, ...] = ("default",),
) -> dict:
    """Send ``payloads`` from ``clients`` concurrent connections, the i-th asking for ``models[i % len]``;
    count errors, latencies, sentences."""
    queue: asyncio.Queue = asyncio.Queue()
    for i, p in enumerate(payloads):
        queue.put_nowait((models[i % len(models)], p))
    latencies: list[float] = []
    errors: list[str] = []
    sentences = 0
    deadline = time.perf_counter() + time_limit
    failures = client_failures()

    async def one(post: Post) -> None:
        nonlocal sentences
        while not queue.empty() and time.perf_counter() < deadline:
            model, texts = queue.get_nowait()
            body = orjson.dumps({"input": texts, "model": model, "encoding_format": FORMAT})
            began = time.perf_counter()
            try:
                status, raw = await post(body)
            except failures as err:
                errors.append(type(err).__name__)
                continue
            if status != 200:
                errors.append(f"{status}: {raw[:100]!r}")
                continue
            if len(orjson.loads(raw)["data"]) != len(texts):
                errors.append("wrong number of embeddings")
                continue
            latencies.append(time.perf_counter() - began)
            sentences += len(texts)

    began = time.perf_counter()
    async with open_client(url, clients, client) as post:
        await asyncio.gather(*(one(post) for _ in range(clients)))
    wall = time.perf_counter() - began
    return {
        "requests": len(latencies),
        "errors": errors,
        "wall": wall,
        "sentences": sentences,
        "unsent": queue.qsize(),
        "p50": float(np.percentile(latencies, 50)) * 1e3 if latencies else float("nan"),
        "p99": float(np.percentile(latencies, 99)) * 1e3 if latencies else float("nan"),
    }


# -- the malformed-request mix ------------------------------------------------------------------------------
GOOD = "good (8 sentences)"
PER_REQUEST = 8


HALF_OPEN = "half-open connection (half a request line)"
DRIPPER = "body dripped, a byte every 25 s"
BIG_HEADER = "a header of 1 MiB"
ABANDONED = "/similarity 1,000 × 8,000 characters, abandoned after 2 s"
HELD = (HALF_OPEN, DRIPPER, BIG_HEADER, ABANDONED)  # the kinds sent on connections of their own
EMBEDDINGS, SEARCH, SIMILARITY = "/v1/embeddings", "/search", "/similarity"
EMPTY_ARRAYS = b'{"input": [' + b"[]," * 999_999 + b"[]]}"  # 3 MB: a million values the parser would build


def malformed_kinds(texts: list[str]) -> dict[str, Callable[[int], tuple[bytes, int]]]:
    """Kind -> (request number -> (body, the status it should get)): client mistakes, each a 4xx."""

    def among_good(bad: str) -> Callable[[int], tuple[bytes, int]]:
        # json.dumps writes a lone surrogate as the escape "\ud800", as JSON allows
        return lambda i: (
            json.dumps({"input": [*texts[i : i + PER_REQUEST - 1], bad], "model": "default"}).encode(),
            400,
        )

    return {
        "lone surrogate (1 of 8 texts)": among_good("a lone \ud800 surrogate"),
        "empty string (1 of 8 texts)": among_good(""),
        "bad JSON": lambda i: (b'{"input": ["' + texts[i].encode() + b'", ', 400),
        "dimensions of 5,000 digits": lambda i: (
            b'{"input": "' + texts[i].replace('"', "").encode() + b'", "dimensions": ' + b"7" * 5000 + b"}",
            400,
        ),
        "200,000 nested [": lambda i: (b'{"input": ' + b"[" * 200_000 + b"}", 400),
        "1,000,000 empty arrays": lambda i: (EMPTY_ARRAYS, 400),
        "unknown model": lambda i: (json.dumps({"input": texts[i], "model": "text-embedding-3-small"}).encode(), 404),
        "/search 2,048 queries × k 1,000": lambda i: (
            json.dumps({"query": [texts[(i + j) % len(texts)] for j in range(2048)], "k": 1000}).encode(),
            422,
        ),
        "/similarity 2,048 × 2,048": lambda i: (
            json.dumps({"a": [texts[(i + j) % len(texts)] for j in range(2048)]}).encode(),
            422,
        ),
    }


def kind_path(kind: str) -> str:
    """The endpoint a kind of request goes to."""
    return next((path for path in (SEARCH, SIMILARITY) if kind.startswith(path)), EMBEDDINGS)


async def said_by_server(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """What the server sends until it closes the connection (a reset after its answer counts as closed)."""
    said = b""
    async with asyncio.timeout(timeout):
        while True:
            try:
                chunk = await reader.read(65536)
            except ConnectionResetError:
                return said
            if not chunk:
                return said
            said += chunk


def count_status(tally: dict[str, int], said: bytes, should: int) -> None:
    """Count what the server answered on a connection of its own (no answer: dropped)."""
    if not said.startswith(b"HTTP/1.1 ") or not said[9:12].isdigit():
        tally["dropped"] += 1
        return
    status = int(said[9:12])
    tally[f"{status // 100}xx"] = tally.get(f"{status // 100}xx", 0) + 1
    tally["as expected"] += status == should


async def half_open_connections(host: str, port: int, at_once: int, deadline: float, tally: dict[str, int]) -> None:
    """Until ``deadline``, keep ``at_once`` connections open that send half a request line and stop; each
    counts as expected when the server answers 408 and closes it (within 60 s), else as dropped."""

    async def one() -> None:
        while time.perf_counter() < deadline:
            tally["sent"] += 1
            try:
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(b"POST /v1/embed")
                await writer.drain()
                said = await said_by_server(reader, 60)
                writer.close()
            except (OSError, TimeoutError):
                tally["dropped"] += 1
                continue
            count_status(tally, said, 408)

    await asyncio.gather(*(one() for _ in range(at_once)))


async def drippers(host: str, port: int, at_once: int, deadline: float, tally: dict[str, int]) -> None:
    """``at_once`` connections that send a request's headers, then its body a byte every 25 s (under the
    read time-out, 30 s); each should get 408 when its whole body is late (``--body-timeout``, 60 s). A new
    one starts only while there is time left for its answer."""
    head = (
        b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )

    async def one() -> None:
        while deadline - time.perf_counter() > 70:
            tally["sent"] += 1
            try:
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(head + b'{"input": "')
                await writer.drain()
                answer = asyncio.ensure_future(said_by_server(reader, 120))
                while not answer.done():
                    await asyncio.wait([answer], timeout=25)
                    if not answer.done():
                        writer.write(b"a")
                        await writer.drain()
                said = await answer
                writer.close()
            except (OSError, TimeoutError):
                tally["dropped"] += 1
                continue
            count_status(tally, said, 408)

    await asyncio.gather(*(one() for _ in range(at_once)))


def send_big_header(host: str, port: int) -> bytes:
    """A request with a 1 MiB header, sent in 64 KiB pieces, and what the server answers (a blocking socket:
    asyncio's streams drop what was received once a write fails, and the server stops reading early)."""
    said = b""
    with socket.create_connection((host, port), timeout=60) as conn:
        with contextlib.suppress(OSError):  # the server closes the connection: it reads no further
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            for _ in range(16):
                conn.sendall(b"a" * 65536)
        with contextlib.suppress(ConnectionResetError):
            while chunk := conn.recv(65536):
                said += chunk
    return said


async def big_headers(host: str, port: int, at_once: int, deadline: float, tally: dict[str, int]) -> None:
    """``at_once`` connections at a time that send a request with a 1 MiB header; each should get 431 and be
    closed."""

    async def one() -> None:
        while time.perf_counter() < deadline:
            tally["sent"] += 1
            try:
                said = await asyncio.to_thread(send_big_header, host, port)
            except (OSError, TimeoutError):
                tally["dropped"] += 1
                continue
            count_status(tally, said, 431)
            await asyncio.sleep(0.5)

    await asyncio.gather(*(one() for _ in range(at_once)))


async def abandoned_requests(host: str, port: int, at_once: int, deadline: float, tally: dict[str, int]) -> None:
    """``at_once`` clients at a time that send a /similarity of 1,000 texts of 8,000 characters (minutes of
    model time) and leave 2 s later, then wait 8 s; ``mixed_load`` counts the server's 499s for them."""
    texts = [f"{i} " + "a long text about spreadsheets and crashes " * 186 for i in range(1000)]
    body = orjson.dumps({"a": texts})
    head = (
        "POST /similarity HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()

    async def one() -> None:
        while deadline - time.perf_counter() > 5:
            tally["sent"] += 1
            try:
                _, writer = await asyncio.open_connection(host, port)
                writer.write(head + body)
                await writer.drain()
                await asyncio.sleep(2)
                writer.close()
            except OSError:
                tally["dropped"] += 1
            await asyncio.sleep(8)

    await asyncio.gather(*(one() for _ in range(at_once)))


def gone_requests(base: str, path: str) -> int:
    """The requests for ``path`` the server counts as cancelled, their client gone (status 499)."""
    for line in httpx.get(base + "/metrics", timeout=30).text.splitlines():
        if line.startswith(f'sbert_requests_total{{endpoint="{path}",status="499"}}'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def peak_rss_mb(pid: int | None) -> str:
    """The process's peak resident memory (VmHWM) in MB, or 'n/a'."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return f"{int(line.split()[1]) / 1024:,.0f} MB"
    except (OSError, ValueError):
        pass
    return "n/a"


async def mixed_load(
    url: str, texts: list[str], expected: np.ndarray, args: argparse.Namespace
) -> tuple[dict[str, dict[str, int]], list[float], float, float]:
    """Good and malformed requests for ``args.time_limit`` seconds from ``args.clients`` connections.

    Returns per kind the counts (sent, 2xx, 4xx, 5xx, dropped, as expected), the good requests'
    latencies, the largest difference between a served vector and the library's, and the wall time."""
    kinds = malformed_kinds(texts)
    fields = ("sent", "2xx", "4xx", "5xx", "dropped", "as expected")
    counts = {k: dict.fromkeys(fields, 0) for k in (GOOD, *kinds, *HELD)}
    base = url.rsplit(EMBEDDINGS, 1)[0]
    latencies: list[float] = []
    worst = 0.0
    rng = random.Random(0)
    starts = range(0, len(texts) - PER_REQUEST, PER_REQUEST)
    failures = client_failures()
    deadline = time.perf_counter() + args.time_limit

    def next_request() -> tuple[str, bytes, int, int]:
        start = rng.choice(starts)
        if rng.random() < args.malformed:
            kind = rng.choice(list(kinds))
            return kind, *kinds[kind](start), start
        body = {"input": texts[start : start + PER_REQUEST], "model": "default", "encoding_format": FORMAT}
        return GOOD, orjson.dumps(body), 200, start

    def served_right(raw: bytes, start: int) -> bool:
        nonlocal worst
        data = orjson.loads(raw)["data"]
        got = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in data])
        if got.shape != (PER_REQUEST, expected.shape[1]):
            return False
        worst = max(worst, float(np.abs(got - expected[start : start + PER_REQUEST]).max()))
        return bool(np.abs(got - expected[start : start + PER_REQUEST]).max() <= 1e-4)

    async def one(post: Post) -> None:
        while time.perf_counter() < deadline:
            kind, body, should, start = next_request()
            tally = counts[kind]
            tally["sent"] += 1
            began = time.perf_counter()
            try:
                status, raw = await post(body, base + kind_path(kind))
            except failures:
                tally["dropped"] += 1
                continue
            tally[f"{status // 100}xx"] = tally.get(f"{status // 100}xx", 0) + 1
            if status == should and (kind != GOOD or served_right(raw, start)):
                tally["as expected"] += 1
            if kind == GOOD and status == 200:
                latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    host_port = base.split("://", 1)[1].rsplit(":", 1)
    host, port = host_port[0], int(host_port[1])
    held = [
        half_open_connections(host, port, args.half_open, deadline, counts[HALF_OPEN]),
        drippers(host, port, args.drippers, deadline, counts[DRIPPER]),
        big_headers(host, port, args.big_headers, deadline, counts[BIG_HEADER]),
        abandoned_requests(host, port, args.abandoned, deadline, counts[ABANDONED]),
    ]
    async with open_client(url, args.clients, args.client) as post:
        await asyncio.gather(*held, *(one(post) for _ in range(args.clients)))
    await asyncio.sleep(2)  # the last abandoned request's cancellation counted
    counts[ABANDONED]["as expected"] = min(gone_requests(base, SIMILARITY), counts[ABANDONED]["sent"])
    return counts, latencies, worst, time.perf_counter() - began


def run_malformed(args: argparse.Namespace, texts: list[str]) -> None:
    """The robustness mix against a fresh ``sbert serve`` (or ``--url``); writes its results file."""
    model = sbert.load("default", device="cpu", backend=args.backend)
    expected = model.encode(texts, show_progress=False)  # what every good request must get back
    server, url, peak = None, args.url, "n/a"
    with tempfile.TemporaryDirectory() as folder:
        if url is None:
            from sbert.search.index.folder import VectorIndex

            VectorIndex.build(Path(folder) / "ix", expected, model="default", texts=texts)  # for /search
            port = free_port()
            server = start_server(port, args.backend, args.max_wait_ms, ["--index", str(Path(folder) / "ix")])
            url = f"http://127.0.0.1:{port}/v1/embeddings"
        try:
            asyncio.run(load(url, [texts[:8]] * args.clients, args.clients, 30, args.client))  # warm-up
            counts, latencies, worst, wall = asyncio.run(mixed_load(url, texts, expected, args))
            peak = peak_rss_mb(server.pid if server is not None else None)
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=60)
    total = {key: sum(c[key] for c in counts.values()) for key in counts[GOOD]}
    should = {GOOD: "200, right vectors", **{k: str(v(0)[1]) for k, v in malformed_kinds(texts).items()}}
    should |= {HALF_OPEN: "408, closed", DRIPPER: "408, closed", BIG_HEADER: "431, closed", "**all**": ""}
    should[ABANDONED] = "cancelled (499 in /metrics)"
    rows = [
        [kind, f"{c['sent']:,}", f"{c['2xx']:,}", f"{c['4xx']:,}", f"{c['5xx']:,}", f"{c['dropped']:,}",
         should[kind], f"{c['as expected']:,}"]
        for kind, c in [*counts.items(), ("**all**", total)]
    ]  # fmt: skip
    print(*rows, sep="\n")
    good = counts[GOOD]
    p50, p99 = (float(np.percentile(latencies, q)) * 1e3 if latencies else float("nan") for q in (50, 99))
    server_line = f"`{args.url}` (started by hand)" if args.url else f"`sbert serve --backend {args.backend}`"
    lines = [
        "# Load test with malformed requests: sbert serve on loopback",
        "",
        f"{args.clients} concurrent clients ({args.client}, one process, keep-alive connections) send requests "
        f"to {server_line} for {args.time_limit:.0f} s. A request is malformed with probability "
        f"{args.malformed:g}, its kind drawn uniformly from the rows below; the others carry "
        f"{PER_REQUEST} STSb test sentences (encoding_format {FORMAT}) and count as expected only if all "
        f"{PER_REQUEST} vectors equal the library's `encode` within 1e-4. The /search and /similarity rows "
        "are small requests asking for huge answers (refused by `--max-search-hits` and "
        "`--max-similarity-cells`); the million empty arrays (3 MB) are refused by their count before parsing. "
        f"Meanwhile, on connections of their own: {args.half_open} at a time send half a request line and stop "
        f"(the server's `--header-timeout` should answer 408 and close each), {args.drippers} send a body a byte "
        f"every 25 s (`--body-timeout` should answer 408), {args.big_headers} send a 1 MiB header "
        f"(`--max-header-kb` should answer 431), and {args.abandoned} send a /similarity of 1,000 texts of 8,000 "
        "characters and leave after 2 s (the server should cancel it: counted by the 499s in its /metrics; "
        "no answer reaches them, so their status columns stay 0). 'dropped': the request got no HTTP answer "
        "(connection closed or reset, timeout).",
        "",
        *markdown_table(["request", "sent", "2xx", "4xx", "5xx", "dropped", "should get", "got what it should"], rows),
        "",
        f"Requests sent {total['sent']:,}; 2xx {total['2xx']:,}, 4xx {total['4xx']:,}, "
        f"**5xx {total['5xx']:,}, dropped {total['dropped']:,}**. Good requests: {good['as expected']:,} of "
        f"{good['sent']:,} answered 200 with the library's vectors (largest difference {worst:.1e}), "
        f"{good['2xx'] * PER_REQUEST / wall:,.0f} sentences/s, latency p50 / p99 {p50:.0f} / {p99:.0f} ms "
        f"({wall:.0f} s wall). Peak memory of the server process (VmHWM): {peak}.",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "fastapi", "uvicorn", args.client)),
    ]
    write_result(args.out or "serve_load_malformed.md", lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--passes", type=int, default=3, help="times the sentence list is sent per setting")
    parser.add_argument("--per-request", default="8,1", help="sentences per request, one run each")
    parser.add_argument("--time-limit", type=float, default=180.0, help="seconds per run")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--max-wait-ms", type=float, default=5.0, help="the server's batching wait")
    parser.add_argument("--server-batch-size", type=int, default=32, help="the server's forward batch size")
    parser.add_argument("--server-max-tokens", type=int, default=None, help="the server's forward token budget")
    parser.add_argument("--server-packing", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--server-workers", type=int, default=None, help="the server's batch workers (its default)")
    parser.add_argument(
        "--client",
        choices=("aiohttp", "httpx"),
        default=None,
        help="the load generator [default: aiohttp if installed]",
    )
    parser.add_argument("--malformed", type=float, default=0.0, help="share of malformed requests: the mix run")
    parser.add_argument("--half-open", type=int, default=16, help="half-open connections at a time in the mix")
    parser.add_argument("--drippers", type=int, default=4, help="connections dripping a body at a time in the mix")
    parser.add_argument("--big-headers", type=int, default=2, help="connections sending 1 MiB headers in the mix")
    parser.add_argument("--abandoned", type=int, default=1, help="clients abandoning long requests in the mix")
    parser.add_argument("--url", default=None, help="a running server's /v1/embeddings URL (else one is started)")
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default=None, help="file name under benchmarks/results")
    args = parser.parse_args()
    args.client = args.client or ("aiohttp" if importlib.util.find_spec("aiohttp") else "httpx")
    texts = stsb_test_sentences(data_dir(args.data))
    if args.malformed > 0:
        return run_malformed(args, texts)

    model = sbert.load("default", device="cpu", backend=args.backend)
    model.encode(texts[:256])
    can_pack = model.can_pack
    packing = {"auto": can_pack, "on": True, "off": False}[args.server_packing]

    def library_rate(**options) -> tuple[float, float]:
        """Sentences/s (median of 3) and sentences per CPU-second."""
        times, cpu = [], cpu_seconds()
        for _ in range(3):
            began = time.perf_counter()
            model.encode(texts, show_progress=False, **options)
            times.append(time.perf_counter() - began)
        return len(texts) / statistics.median(times), 3 * len(texts) / (cpu_seconds() - cpu)

    default_rate, default_per_cpu = library_rate(batch_size=32)
    packed_rate = library_rate(batch_size=256, packing=True)[0] if can_pack else float("nan")
    print(f"library: {default_rate:,.0f} sentences/s (batch 32), {packed_rate:,.0f} (packed)", flush=True)

    port = free_port()
    extra = ["--batch-size", str(args.server_batch_size)]
    if args.server_workers:
        extra += ["--workers", str(args.server_workers)]
    if args.server_max_tokens:
        extra += ["--max-tokens", str(args.server_max_tokens)]
    if args.server_packing != "auto":
        extra += ["--packing" if packing else "--no-packing"]
    server = start_server(port, args.backend, args.max_wait_ms, extra)
    url = f"http://127.0.0.1:{port}/v1/embeddings"
    rows, total_errors = [], 0
    try:
        asyncio.run(load(url, [texts[:8]] * args.clients, args.clients, 30, args.client))  # warm-up
        for per in (int(x) for x in args.per_request.split(",")):
            payloads = [texts[i : i + per] for i in range(0, len(texts), per)] * args.passes
            before = batch_totals(port)
            cpu_before = cpu_seconds(), cpu_seconds(server.pid)
            result = asyncio.run(load(url, payloads, args.clients, args.time_limit, args.client))
            client_cpu, server_cpu = cpu_seconds() - cpu_before[0], cpu_seconds(server.pid) - cpu_before[1]
            after = batch_totals(port)
            mean_batch = (after[0] - before[0]) / max(after[1] - before[1], 1)
            rate = result["sentences"] / result["wall"]
            total_errors += len(result["errors"])
            rows.append(
                [
                    per,
                    f"{result['requests']:,} of {len(payloads):,}",
                    len(result["errors"]),
                    f"{result['requests'] / result['wall']:,.0f}",
                    f"{rate:,.0f}",
                    f"{result['p50']:.0f} / {result['p99']:.0f}",
                    f"{mean_batch:.0f}",
                    f"{server_cpu / result['wall']:.2f} / {client_cpu / result['wall']:.2f}",
                    f"{result['sentences'] / server_cpu / default_per_cpu:.0%}",
                    f"**{rate / default_rate:.0%}**",
                ]
            )
            print(rows[-1], result["errors"][:3], flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)
    # The library on batches like the server's: shuffled texts, groups of the mean merged batch size,
    # one tokenize + encode_tokenized call per group (what the server's engine does per batch).
    shuffled = random.Random(0).sample(texts, len(texts))
    for row in rows:
        size = max(1, int(float(row[6])))
        began = time.perf_counter()
        for i in range(0, len(shuffled), size):
            group = shuffled[i : i + size]
            tokens = model.tokenize(group)
            model.encode_tokenized(tokens, show_progress=False, batch_size=256 if packing else 32, packing=packing)
        same_batches = len(texts) / (time.perf_counter() - began)
        row.insert(-2, f"{same_batches:,.0f} ({same_batches / default_rate:.0%})")
    lines = [
        "# Load test: sbert serve on loopback",
        "",
        f"{args.clients} concurrent clients ({args.client}, one process) send the {len(texts):,} STSb test "
        "sentences to /v1/embeddings "
        f"(encoding_format {FORMAT}, as the openai client sends; {args.passes} passes per run, a "
        f"{args.time_limit:.0f} s limit per run) on a server started with "
        f"`sbert serve --backend {args.backend} --max-wait-ms {args.max_wait_ms:g} {' '.join(extra)}` (dynamic "
        "batching: up to 256 texts per merged batch; "
        + ("packed: each merged batch runs unpadded" if packing else "not packed: sorted batches of 32")
        + "). The library's own rate, one call over all sentences (median of 3, server idle): "
        f"`encode(sentences)` (batch 32, smart batching) {default_rate:,.0f} sentences/s "
        f"({default_per_cpu:,.0f} per CPU-second); packed, `encode(sentences, batch_size=256, packing=True)`, "
        f"{packed_rate:,.0f} sentences/s (sorted texts leave little padding to save). The clients, the "
        f"server and its workers share this machine's {os.cpu_count()} cores: the load generator's "
        "CPU is taken from the server's.",
        "",
        *markdown_table(
            [
                "sentences per request",
                "requests done",
                "errors",
                "requests/s",
                "sentences/s",
                "latency p50 / p99 ms",
                "texts per model batch (mean)",
                "cores busy: server / clients",
                "library on batches of that size, sentences/s",
                "sentences per server CPU-second, share of the library's",
                "sentences/s, share of the library's",
            ],
            rows,
        ),
        "",
        f"Errors in all runs: {total_errors}. 'library on batches of that size' encodes the sentences, "
        "shuffled, in groups of the server's mean merged batch, one call per group, packed as the server "
        "packs: the ceiling dynamic batching leaves, before any HTTP cost.",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "fastapi", "uvicorn", args.client)),
    ]
    write_result(args.out or "serve_load.md", lines)


if __name__ == "__main__":
    main()
