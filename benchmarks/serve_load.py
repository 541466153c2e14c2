"""A bounded load test of ``sbert serve`` on loopback, against the library's own encode throughput.

The server runs in its own process (``sbert serve``, default model, torch backend). 32 concurrent
clients (asyncio + aiohttp, or httpx with --client; one process) send the STSb test sentences to
/v1/embeddings, a fixed number of requests each run, under a time limit. Reported: errors,
requests/s, sentences/s, latency p50/p99, CPU use, and sentences/s as a share of the library's own
rate on the same sentences (``encode(sentences)``, batch 32, smart batching, one call, server idle);
also sentences per server CPU-second against the library's per CPU-second. The load generator
shares the machine's cores with the server.

    python benchmarks/serve_load.py [--clients 32] [--passes 3] [--per-request 8,1] [--time-limit 180]
                                    [--server-packing auto|on|off] [--server-workers N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import torch
from common import environment_lines, markdown_table, write_result
from encode_throughput import stsb_test_sentences

import sbert
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
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError("the server did not start: " + (process.stderr.read() if process.stderr else ""))


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


async def load(url: str, payloads: list[list[str]], clients: int, time_limit: float, client: str = "aiohttp") -> dict:
    """Send ``payloads`` from ``clients`` concurrent connections; count errors, latencies, sentences."""
    queue: asyncio.Queue = asyncio.Queue()
    for p in payloads:
        queue.put_nowait(p)
    latencies: list[float] = []
    errors: list[str] = []
    sentences = 0
    deadline = time.perf_counter() + time_limit

    async def one(post) -> None:
        nonlocal sentences
        while not queue.empty() and time.perf_counter() < deadline:
            texts = queue.get_nowait()
            body = orjson.dumps({"input": texts, "model": "default", "encoding_format": FORMAT})
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

    import aiohttp

    failures = (TimeoutError, OSError, httpx.HTTPError, aiohttp.ClientError)
    headers = {"Content-Type": "application/json"}
    began = time.perf_counter()
    if client == "aiohttp":
        connector = aiohttp.TCPConnector(limit=clients)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as http:

            async def post(body):
                async with http.post(url, data=body, headers=headers) as response:
                    return response.status, await response.read()

            await asyncio.gather(*(one(post) for _ in range(clients)))
    else:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(limits=limits, timeout=60) as http:

            async def post(body):
                response = await http.post(url, content=body, headers=headers)
                return response.status_code, response.content

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
    parser.add_argument("--client", choices=("aiohttp", "httpx"), default="aiohttp", help="the load generator")
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default="serve_load.md", help="file name under benchmarks/results")
    args = parser.parse_args()
    texts = stsb_test_sentences(data_dir(args.data))

    model = sbert.load("default", device="cpu", backend=args.backend)
    model.encode(texts[:256])
    can_pack = args.backend == "torch" and model.transformer.can_pack
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
    # one tokenize + encode call per group (what the server's worker does per batch).
    shuffled = random.Random(0).sample(texts, len(texts))
    for row in rows:
        size = max(1, int(float(row[6])))
        began = time.perf_counter()
        for i in range(0, len(shuffled), size):
            group = shuffled[i : i + size]
            model.transformer.tokenize(group)
            model.encode(group, show_progress=False, batch_size=256 if packing else 32, packing=packing)
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
    write_result(args.out, lines)


if __name__ == "__main__":
    main()
