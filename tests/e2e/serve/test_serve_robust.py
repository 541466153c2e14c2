"""The service under client mistakes (issue 13): bad requests are 4xx and never hurt other clients' requests."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading

import numpy as np
import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from test_serve import TEXTS, Server, free_port  # noqa: E402

from sbert.serve.app import EngineSettings, create_app  # noqa: E402

pytestmark = pytest.mark.slow  # starts the service

JSON = {"Content-Type": "application/json"}
POISON = "this text makes the model fail"  # stands for an input that fails only inside a merged batch
SURROGATE = b'{"input": ["A fine sentence.", "bad \\ud800 text"], "encoding_format": "float"}'

# (name, raw body, expected status, fragment of the error message): client mistakes, each a 4xx
BAD = [
    ("lone surrogate", SURROGATE, 400, "input[1]"),
    ("lone surrogate alone", b'{"input": "\\udfff"}', 400, "surrogate"),
    ("empty string", b'{"input": ["ok", ""]}', 400, "input[1]"),
    ("bad JSON", b'{"input": ["ok"', 400, "not valid JSON"),
    ("huge dimensions", b'{"input": "x", "dimensions": ' + b"9" * 5000 + b"}", 400, "digits"),
    ("deep nesting", b"[" * 200_000, 400, "JSON values"),  # refused before parsing: more values than allowed
    ("deep nesting in input", b'{"input": ' + b"[" * 200_000 + b"}", 400, "JSON values"),
    ("nested 2,000 deep", b'{"input": ' + b"[" * 2_000 + b"}", 400, "nested"),  # few values: refused parsing
    ("unknown model", b'{"input": "x", "model": "text-embedding-3-small"}', 404, "text-embedding-3-small"),
    ("model not a string", b'{"input": "x", "model": ["default"]}', 400, "'model'"),
]


@pytest.fixture(scope="module")
def app(model):
    app = create_app(model, model_name="default", engine=EngineSettings(max_wait_ms=20))
    batcher = app.state.engine.batcher
    encode = batcher.encode_fn

    def poisoned(texts):
        if POISON in texts:
            raise RuntimeError("the model failed on this batch")
        return encode(texts)

    batcher.encode_fn = poisoned
    return app


@pytest.fixture(scope="module")
def server(app):
    running = Server(app)
    yield running
    running.stop()


def good_body(i: int) -> bytes:
    return json.dumps({"input": [TEXTS[i % 4], TEXTS[(i + 1) % 4]], "encoding_format": "float"}).encode()


async def fire(url: str, bodies: list[bytes], connections: int = 16) -> list[tuple[int, dict]]:
    """POST every body to /v1/embeddings at once over ``connections`` keep-alive connections."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:

        async def one(body: bytes) -> tuple[int, dict]:
            response = await http.post("/v1/embeddings", content=body, headers=headers)
            return response.status_code, response.json()

        return await asyncio.gather(*(one(b) for b in bodies))


@pytest.mark.parametrize("name, body, status, fragment", BAD, ids=[b[0] for b in BAD])
def test_client_mistakes_get_4xx_naming_what_is_wrong(server, name, body, status, fragment):
    response = httpx.post(server.url + "/v1/embeddings", content=body, headers=JSON, timeout=60)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert fragment in error["message"]
    assert set(error) == {"message", "type", "param", "code"}


def test_lone_surrogates_are_refused_on_similarity_too(server):
    for body, item in [(b'{"a": ["a cat"], "b": ["a \\ud83d dog"]}', "b[0]"), (b'{"a": ["x", "\\ud800"]}', "a[1]")]:
        response = httpx.post(server.url + "/similarity", content=body, headers=JSON, timeout=60)
        assert response.status_code == 400 and item in response.json()["error"]["message"]


def test_concurrent_mix_of_good_and_bad_requests_gets_no_5xx(server, model):
    """Bad requests merged with good ones (the issue: 209 good requests answered 500) fail alone, with 4xx."""
    bodies = [good_body(i) for i in range(24)] + [b for _, b, _, _ in BAD for _ in range(2)]
    order = np.random.default_rng(0).permutation(len(bodies))
    answers = asyncio.run(fire(server.url, [bodies[i] for i in order]))
    by_body = {int(i): answer for i, answer in zip(order, answers, strict=True)}
    expected = model.encode(TEXTS)
    for i in range(24):
        status, payload = by_body[i]
        assert status == 200, payload
        got = np.array([d["embedding"] for d in payload["data"]])
        assert np.abs(got - expected[[i % 4, (i + 1) % 4]]).max() <= 1e-5
    for j, (name, _, status, _) in enumerate(b for b in BAD for _ in range(2)):
        assert by_body[24 + j][0] == status, (name, by_body[24 + j])


def test_a_failing_merged_batch_fails_only_its_guilty_request(server, model):
    """A batch that fails inside the model is retried request by request: only the guilty one gets 500."""
    poison = json.dumps({"input": [POISON], "encoding_format": "float"}).encode()
    bodies = [good_body(i) for i in range(12)] + [poison] * 3
    answers = asyncio.run(fire(server.url, bodies))
    expected = model.encode(TEXTS)
    for i, (status, payload) in enumerate(answers[:12]):
        assert status == 200, payload
        got = np.array([d["embedding"] for d in payload["data"]])
        assert np.abs(got - expected[[i % 4, (i + 1) % 4]]).max() <= 1e-5
    for status, payload in answers[12:]:
        assert status == 500 and payload["error"]["type"] == "server_error"


def test_a_500_keeps_the_keep_alive_connection_open(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    try:
        for body, status in [(json.dumps({"input": POISON}), 500), (json.dumps({"input": "fine"}), 200)] * 2:
            connection.request("POST", "/v1/embeddings", body=body, headers=headers)
            response = connection.getresponse()
            assert response.status == status
            assert response.getheader("connection", "").lower() != "close"
            payload = json.loads(response.read())
            assert ("error" in payload) == (status == 500)
            threading.Event().wait(0.1)  # give a closing server time to close, so the next request would see it
    finally:
        connection.close()


@pytest.mark.parametrize("name", ["default", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", None])
def test_the_served_model_is_accepted_by_its_names(server, model, name):
    body = {"input": "hello"} | ({"model": name} if name else {})
    assert httpx.post(server.url + "/v1/embeddings", json=body, timeout=60).status_code == 200
    by_path = {"input": "hello", "model": str(model.path)}
    assert httpx.post(server.url + "/v1/embeddings", json=by_path, timeout=60).status_code == 200


def test_unknown_model_gets_openais_404(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.embeddings.create(model="text-embedding-3-small", input="hello")
    error = caught.value.body
    assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"
    assert "text-embedding-3-small" in error["message"] and "default" in error["message"]


def test_metrics_label_by_route_not_raw_path(server):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        before = len(http.get("/metrics").text)
        for i in range(300):
            assert http.get(f"/nope-{i}").status_code == 404
        http.post("/v1/embeddings/nope", json={"input": "x"})
        text = http.get("/metrics").text
    assert "/nope" not in text
    assert 'endpoint="(unmatched)",status="404"' in text
    assert 'endpoint="/metrics"' in text
    assert len(text) - before < 5_000  # one new label, not 300


def test_second_serve_on_a_busy_port_fails_before_loading_the_model(monkeypatch):
    from click.testing import CliRunner

    import sbert
    from sbert.cli import main

    loaded = []
    monkeypatch.setattr(sbert, "load", lambda *a, **k: loaded.append(a))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--port", str(port)])
    assert result.exit_code == 1, result.output
    assert f"127.0.0.1:{port}" in result.output and "already in use" in result.output
    assert loaded == []  # refused at once, without loading the model


def test_serve_listens_on_the_socket_it_bound_first(model):
    """``sbert serve``'s path: bind, then build the app and run uvicorn on that socket."""
    from sbert.serve import bind, make_server

    sock = bind("127.0.0.1", free_port())
    port = sock.getsockname()[1]
    server = make_server(create_app(model, model_name="default"), sock=sock, graceful_seconds=5)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(600):
            if server.started:
                break
            threading.Event().wait(0.05)
        response = httpx.post(f"http://127.0.0.1:{port}/v1/embeddings", json={"input": "hi"}, timeout=30)
        assert response.status_code == 200 and len(response.json()["data"][0]["embedding"]) == 384
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_batcher_retries_a_failing_merged_batch_request_by_request():
    from sbert.serve.merging import DynamicBatcher

    calls: list[list[str]] = []

    def encode(texts):
        calls.append(texts)
        if "poison" in texts:
            raise ValueError("cannot encode 'poison'")
        return np.array([[len(t)] for t in texts], dtype=np.float32)

    batcher = DynamicBatcher(encode, max_batch_texts=100, max_wait_ms=200)

    async def merged():
        jobs = [["a"], ["bb", "poison"], ["ccc"]]
        return await asyncio.gather(*(batcher.embed(j) for j in jobs), return_exceptions=True)

    first, guilty, third = asyncio.run(merged())
    batcher.close()
    assert calls[0] == ["a", "bb", "poison", "ccc"]  # merged, failed, then retried alone
    assert calls[1:] == [["a"], ["bb", "poison"], ["ccc"]]
    assert first[:, 0].tolist() == [1] and third[:, 0].tolist() == [3]
    assert isinstance(guilty, ValueError) and "poison" in str(guilty)
    assert batcher.stats.batches == 4
