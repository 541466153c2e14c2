"""The HTTP service, on loopback: the official openai client, bad requests, auth, batching, search."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

import uvicorn  # noqa: E402

from sbert.serve.app import Limits, create_app  # noqa: E402
from sbert.serve.merging import DynamicBatcher  # noqa: E402

pytestmark = pytest.mark.slow  # starts the service

KEY = "test-key"
TEXTS = ["A man is playing a guitar.", "The new movie is awesome.", "A woman slices an onion.", "Hi"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """uvicorn in a background thread on a free loopback port."""

    def __init__(self, app) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture(scope="module")
def index(model, tmp_path_factory):
    from sbert.search.index.folder import VectorIndex

    corpus = ["Bread is baked in an oven.", "The stock market fell.", "Cats sleep a lot.", "A recipe for pasta."]
    folder = tmp_path_factory.mktemp("serve") / "ix"
    return VectorIndex.build(folder, model.encode(corpus), model="default", texts=corpus)


@pytest.fixture(scope="module")
def cross():
    from sbert.cross_encoder import CrossEncoder

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    return CrossEncoder.load("default", num_labels=1, device="cpu")


@pytest.fixture(scope="module")
def server(model, index, cross):
    limits = Limits(max_inputs=8, max_body_bytes=20_000)
    app = create_app(model, model_name="default", index=index, api_key=KEY, limits=limits, cross_encoder=cross)
    running = Server(app)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY)


def post(server, path, body=None, content=None, key=KEY):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    headers["Content-Type"] = "application/json"  # as json= sends it; the service takes bodies only as JSON
    return httpx.post(server.url + path, json=body, content=content, headers=headers, timeout=30)


def test_openai_client_gets_the_librarys_embeddings(client, model):
    expected = model.encode(TEXTS)
    response = client.embeddings.create(model="default", input=TEXTS)  # the client asks for base64
    got = np.array([d.embedding for d in response.data], dtype=np.float32)
    assert np.abs(got - expected).max() <= 1e-5
    assert [d.index for d in response.data] == list(range(len(TEXTS)))
    ids, _ = model.transformer.tokenize(TEXTS)
    assert response.usage.prompt_tokens == response.usage.total_tokens == sum(len(i) for i in ids)
    floats = client.embeddings.create(model="default", input=TEXTS[0], encoding_format="float")
    assert np.abs(np.array(floats.data[0].embedding) - expected[0]).max() <= 1e-5


def test_dimensions_truncates_and_renormalises(client, model):
    response = client.embeddings.create(model="default", input=TEXTS[:2], dimensions=64)
    got = np.array([d.embedding for d in response.data])
    prefix = model.encode(TEXTS[:2])[:, :64]
    np.testing.assert_allclose(got, prefix / np.linalg.norm(prefix, axis=1, keepdims=True), atol=1e-5)


@pytest.mark.parametrize(
    "body, content, status, fragment",
    [
        (None, b"{not json", 400, "not valid JSON"),
        ({"input": 5}, None, 400, "'input' must be"),
        ({"input": ["ok", 3]}, None, 400, "input[1]"),
        ({"input": [[101, 2023]]}, None, 400, "token arrays"),
        ({"input": ["fine", "  "]}, None, 400, "empty"),
        ({"input": ["x"] * 9}, None, 400, "limit is 8"),
        ({"input": "x", "encoding_format": "int8"}, None, 400, "encoding_format"),
        ({"input": "x", "dimensions": 0}, None, 400, "dimensions"),
        ({"input": "x" * 30_000}, None, 413, "over the limit"),
        ({"input": "word " * 1000, "truncate": False}, None, 400, "longer than the model"),
    ],
)
def test_bad_requests_get_4xx_in_openai_shape(server, body, content, status, fragment):
    response = post(server, "/v1/embeddings", body, content)
    assert response.status_code == status
    assert fragment in response.json()["error"]["message"]
    assert post(server, "/v1/embeddings", {"input": "still answering"}).status_code == 200


def test_auth_and_open_endpoints(server):
    assert post(server, "/v1/embeddings", {"input": "x"}, key=None).status_code == 401
    assert post(server, "/v1/embeddings", {"input": "x"}, key="wrong").json()["error"]["code"] == "invalid_api_key"
    bad_client = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_client.embeddings.create(model="default", input="x")
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    assert post(server, "/v1/embeddings", {"input": "word " * 1000}).status_code == 200  # truncated by default


def test_similarity_and_search(server, model):
    body = {"a": ["a cat", "a dog"], "b": ["a kitten", "a puppy"], "mode": "pairwise"}
    scores = post(server, "/similarity", body).json()["scores"]
    u, v = model.encode(body["a"]), model.encode(body["b"])
    np.testing.assert_allclose(
        scores, (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1), atol=1e-5
    )
    matrix = post(server, "/similarity", {"a": ["x", "y", "z"]}).json()["scores"]
    assert np.array(matrix).shape == (3, 3)
    results = post(server, "/search", {"query": "how to bake bread", "k": 2}).json()["results"]
    assert results[0]["hits"][0]["text"] == "Bread is baked in an oven." and len(results[0]["hits"]) == 2
    assert post(server, "/search", {"query": "x", "k": 0}).status_code == 400


def test_search_rerank_uses_the_cross_encoder(server, cross, index):
    query = "how to bake bread"
    got = post(server, "/search", {"query": query, "k": 2, "rerank": True, "candidates": 4}).json()["results"][0]
    texts = [t for t in index.texts]
    scores = cross.predict([(query, t) for t in texts])
    best = [texts[i] for i in np.argsort(-scores, kind="stable")[:2]]
    assert [h["text"] for h in got["hits"]] == best
    assert got["hits"][0]["score"] == pytest.approx(float(scores.max()), abs=1e-5)
    assert post(server, "/search", {"query": query, "rerank": "yes"}).status_code == 400
    refused = post(server, "/search", {"query": query, "rerank": True, "lead": 0.1})  # a lead is a cosine margin
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "lead", refused.text


def test_concurrent_requests_share_batches_and_metrics_count_them(server, model):
    expected = model.encode(TEXTS)
    results: dict[int, np.ndarray] = {}

    def call(i):
        data = post(server, "/v1/embeddings", {"input": [TEXTS[i % 4]], "encoding_format": "float"}).json()
        results[i] = np.array(data["data"][0]["embedding"])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.abs(results[i] - expected[i % 4]).max() <= 1e-5 for i in range(24))
    metrics = httpx.get(server.url + "/metrics").text
    assert 'sbert_requests_total{endpoint="/v1/embeddings",status="200"}' in metrics
    assert "sbert_batch_texts_bucket" in metrics and "sbert_request_seconds_bucket" in metrics


def test_batcher_merges_concurrent_calls_and_drains_on_close():
    sizes: list[int] = []

    def encode(texts):
        sizes.append(len(texts))
        time.sleep(0.05)
        return np.array([[len(t)] for t in texts], dtype=np.float32)

    batcher = DynamicBatcher(encode, max_batch_texts=100, max_wait_ms=100)

    async def many():
        return await asyncio.gather(*(batcher.embed(["a" * i, "b"]) for i in range(1, 11)))

    out = asyncio.run(many())
    assert [row[:, 0].tolist() for row in out] == [[i, 1] for i in range(1, 11)]  # each gets its own rows
    assert sum(sizes) == 20 and len(sizes) <= 2  # merged, not 10 batches

    async def close_while_busy():
        pending = [asyncio.ensure_future(batcher.embed(["x"])) for _ in range(5)]
        await asyncio.sleep(0.01)
        await asyncio.get_running_loop().run_in_executor(None, batcher.close)
        return await asyncio.gather(*pending)

    assert len(asyncio.run(close_while_busy())) == 5  # in-flight requests finished before shutdown
    with pytest.raises(RuntimeError, match="shut down"):
        asyncio.run(batcher.embed(["late"]))


def test_batcher_workers_run_batches_side_by_side_and_all_stop():
    both_running = threading.Barrier(2, timeout=5)  # passes only if two batches run at the same time

    def encode(texts):
        both_running.wait()
        return np.array([[len(t)] for t in texts], dtype=np.float32)

    batcher = DynamicBatcher(encode, max_batch_texts=1, max_wait_ms=0, workers=2)

    async def two():
        return await asyncio.gather(batcher.embed(["aa"]), batcher.embed(["b"]))

    first, second = asyncio.run(two())
    assert first[:, 0].tolist() == [2] and second[:, 0].tolist() == [1]
    assert batcher.stats.batches == 2
    batcher.close()
    assert not any(t.is_alive() for t in batcher._threads)


def test_batcher_errors_reach_every_request():
    def fail(texts):
        raise ValueError("model exploded")

    batcher = DynamicBatcher(fail, max_wait_ms=20)

    async def two():
        return await asyncio.gather(batcher.embed(["a"]), batcher.embed(["b"]), return_exceptions=True)

    assert all(isinstance(r, ValueError) for r in asyncio.run(two()))
    batcher.close()


def test_cli_serve_passes_its_options(monkeypatch):
    from click.testing import CliRunner

    import sbert.serve
    from sbert.cli import main

    seen = {}
    monkeypatch.setattr(sbert.serve, "serve", lambda encoder, **kw: seen.update(kw, dim=encoder.dim))
    port = free_port()
    args = ["serve", "--port", str(port), "--max-batch", "64", "--no-packing", "--api-key", "k", "--access-log"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert seen["sock"].getsockname() == ("127.0.0.1", port)  # bound by the command before it loaded the model
    seen["sock"].close()
    engine = seen["engine"]
    assert seen["port"] == port and engine.max_batch_texts == 64 and seen["api_key"] == "k"
    assert engine.packing is False and seen["access_log"] is True and seen["dim"] == 384
    assert engine.workers is None and engine.workers_for(on_torch=True) == 2  # the engine's default: 2 on torch
    result = CliRunner().invoke(main, ["serve", "--workers", "0"])
    assert result.exit_code != 0 and "--workers" in result.output


def test_cli_serve_refuses_an_index_of_another_precision(monkeypatch, model, tmp_path):
    from click.testing import CliRunner

    import sbert.serve
    from sbert.cli import main
    from sbert.search.index.folder import VectorIndex

    texts = ["a cat sits", "a dog runs"]
    VectorIndex.build(tmp_path / "int8", model.encode(texts), model="default", texts=texts, backend="onnx/int8")
    monkeypatch.setattr(sbert.serve, "serve", lambda encoder, **kw: kw["sock"].close())
    result = CliRunner().invoke(main, ["serve", "--port", str(free_port()), "--index", str(tmp_path / "int8")])
    assert result.exit_code == 1 and "int8" in result.output, result.output
