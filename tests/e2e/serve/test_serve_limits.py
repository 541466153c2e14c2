"""What one client may ask of the service (issue 22, items 3, 9, 10): small requests cannot ask for huge
answers (caps on search hits, similarity cells and the size of a /search answer, each refused naming its
setting), half-sent requests are timed out and connections capped (real sockets against uvicorn), and an
API key no client can send is refused at start-up."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from test_serve import Server, free_port  # noqa: E402

from sbert.serve.app import create_app  # noqa: E402
from sbert.serve.auth import BadApiKeyError  # noqa: E402
from sbert.serve.errors import ApiError  # noqa: E402
from sbert.serve.schemas import Context, SearchRequest, SimilarityRequest, parse  # noqa: E402
from sbert.serve.settings import Connections, Limits  # noqa: E402

LIMITS = Limits(max_search_hits=20, max_similarity_cells=30, max_response_bytes=3_000)
LONG = [f"Passage {i}: " + "a long passage about baking bread in a hot oven. " * 16 for i in range(6)]  # ~800 chars


DEFAULTS = Limits()


def refusal(raw: dict, model, limits: Limits = DEFAULTS) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(json.dumps(raw).encode(), model, Context(limits, dim=384))
    return caught.value


# -- caps, by their documented defaults (no server) ----------------------------------------------------------
def test_the_issues_search_is_refused_by_the_default_cap():
    """17 KB asking 2,048 queries x k 1,000 answered 190 MB; the default cap is 100,000 hits."""
    err = refusal({"query": [f"q{i}" for i in range(2048)], "k": 1000}, SearchRequest)
    assert (err.status, err.code, err.param) == (422, "too_many_hits", "k")
    assert "2048 queries × k 1000" in err.message and "100000" in err.message and "--max-search-hits" in err.message
    fine = parse(
        json.dumps({"query": [f"q{i}" for i in range(100)], "k": 1000}).encode(), SearchRequest, Context(Limits(), 384)
    )
    assert len(fine.query) == 100


def test_reranking_counts_its_candidates():
    err = refusal({"query": ["q"] * 3, "k": 5, "rerank": True, "candidates": 10}, SearchRequest, LIMITS)
    assert err.status == 422 and "candidates 10" in err.message and err.param == "candidates"
    at_the_limit = {"query": ["q"] * 4, "k": 5, "rerank": True, "candidates": 5}  # 20 hits: allowed
    assert len(parse(json.dumps(at_the_limit).encode(), SearchRequest, Context(LIMITS, 384)).query) == 4


def test_a_search_of_an_index_with_bm25_counts_candidates_unless_it_asks_for_dense():
    fuses = Context(LIMITS, 384, indexes={"": True})  # the index keeps BM25: leaving out 'hybrid' fuses
    with pytest.raises(ApiError) as caught:
        parse(json.dumps({"query": ["q"], "k": 1, "candidates": 21}).encode(), SearchRequest, fuses)
    assert caught.value.code == "too_many_hits" and "candidates 21" in caught.value.message
    dense = {"query": ["q"], "k": 1, "candidates": 21, "hybrid": False}
    assert parse(json.dumps(dense).encode(), SearchRequest, fuses).hybrid is False
    assert parse(json.dumps({"query": ["q"], "k": 1, "candidates": 21}).encode(), SearchRequest, Context(LIMITS, 384))
    several = Context(LIMITS, 384, indexes={"a": True, "b": False})  # each index by its own BM25
    assert parse(json.dumps({"index": "b", "query": ["q"], "k": 1, "candidates": 21}).encode(), SearchRequest, several)
    with pytest.raises(ApiError, match="candidates 21"):
        parse(json.dumps({"index": "a", "query": ["q"], "k": 1, "candidates": 21}).encode(), SearchRequest, several)


def test_the_issues_similarity_is_refused_by_the_default_cap():
    """35 KB asking a 2,048 x 2,048 matrix answered 43 MB; the default cap is 1,000,000 scores."""
    err = refusal({"a": [f"t{i}" for i in range(2048)]}, SimilarityRequest)
    assert (err.status, err.code) == (422, "too_many_cells")
    assert "2048 × 2048" in err.message and "1000000" in err.message and "--max-similarity-cells" in err.message
    pairwise = {"a": [f"t{i}" for i in range(2048)], "b": [f"u{i}" for i in range(2048)], "mode": "pairwise"}
    assert len(parse(json.dumps(pairwise).encode(), SimilarityRequest, Context(Limits(), 384)).a) == 2048


# -- caps, served --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(model, tmp_path_factory) -> Iterator[Server]:
    from sbert.search.index.folder import VectorIndex

    folder = tmp_path_factory.mktemp("limits") / "ix"
    index = VectorIndex.build(folder, model.encode(LONG), model="default", texts=LONG)
    running = Server(create_app(model, model_name="default", index=index, limits=LIMITS))
    yield running
    running.stop()


def post(server: Server, path: str, body: dict) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=60)


def test_caps_are_served_as_openai_errors_naming_the_setting(server):
    refused = post(server, "/search", {"query": ["bread"] * 5, "k": 5})  # 25 hits > 20
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "too_many_hits"
    assert "the limit is 20" in error["message"]
    assert post(server, "/search", {"query": ["bread"] * 2, "k": 1}).status_code == 200
    cells = post(server, "/similarity", {"a": ["x"] * 6})  # 36 scores > 30
    assert cells.status_code == 422 and "the limit is 30" in cells.json()["error"]["message"]
    assert post(server, "/similarity", {"a": ["x"] * 5, "b": ["y"] * 6}).status_code == 200


def test_a_search_answer_of_long_passages_is_bounded(server):
    """Four hits of ~800 characters each are over the 3,000-byte answer limit: 413, naming the setting."""
    refused = post(server, "/search", {"query": "bread", "k": 4})
    assert refused.status_code == 413
    error = refused.json()["error"]
    assert (
        error["code"] == "response_too_large" and "3000" in error["message"] and "--max-response-mb" in error["message"]
    )
    fine = post(server, "/search", {"query": "bread", "k": 2})
    assert fine.status_code == 200 and len(fine.content) <= 3_000


# -- time-outs and the connection cap, with real sockets -----------------------------------------------------
HALF = [
    b"",  # connects and sends nothing
    b"POST /v1/embed",  # half a request line
    b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl",  # half the headers
]
JSON_HEAD = "POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
HALF_BODY = JSON_HEAD.encode() + b'Content-Length: 100\r\n\r\n{"input": '  # 10 of 100 bytes


@pytest.fixture(scope="module")
def guarded(model) -> Iterator[tuple[int, Connections]]:
    """``sbert serve``'s server (make_server) with short time-outs and a cap of 12 connections."""
    from sbert.serve import bind, make_server

    connections = Connections(header_timeout=2.0, read_timeout=2.0, keep_alive=5.0, max_connections=12)
    sock = bind("127.0.0.1", free_port())
    server = make_server(
        create_app(model, model_name="default"), sock=sock, graceful_seconds=5, connections=connections
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield sock.getsockname()[1], connections
    server.should_exit = True
    thread.join(timeout=30)


def half_open(port: int, sent: bytes) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=30)
    if sent:
        conn.sendall(sent)
    return conn


def closed_after(conn: socket.socket) -> tuple[float, bytes]:
    """Seconds until the server closes ``conn`` (reading what it says first), and what it said."""
    began, said = time.monotonic(), b""
    with conn:
        while chunk := conn.recv(4096):
            said += chunk
    return time.monotonic() - began, said


def good_request(port: int) -> int:
    return httpx.post(
        f"http://127.0.0.1:{port}/v1/embeddings", json={"input": "still answering"}, timeout=30
    ).status_code


def test_half_sent_requests_are_closed_within_the_timeouts(guarded):
    """The issue: 200 half-sent headers held for 30 s, none closed. Here each kind of half request is
    answered 408 and closed within the 2 s time-out (+ slack for a busy machine), and good requests go on."""
    port, connections = guarded
    conns = [half_open(port, sent) for sent in [*HALF, HALF_BODY] for _ in range(2)]
    began = time.monotonic()
    results = [closed_after(c) for c in conns]  # recv() would raise TimeoutError (30 s) if never closed
    assert time.monotonic() - began < connections.header_timeout + 8
    for seconds, said in results:
        assert seconds < connections.header_timeout + 8
        assert said.startswith(b"HTTP/1.1 408") and b"request_timeout" in said
    assert good_request(port) == 200


def test_the_connection_cap_answers_503_until_slow_clients_are_timed_out(guarded):
    port, connections = guarded
    conns = [half_open(port, b"GET /hea") for _ in range(connections.max_connections)]
    try:
        assert good_request(port) == 503  # every slot is held by a half-sent request
        for conn in conns:
            closed_after(conn)  # the header time-out frees them
        assert good_request(port) == 200
    finally:
        for conn in conns:
            conn.close()


def test_a_slow_but_steady_body_is_not_cut(guarded):
    """The read time-out is the longest pause, not the whole body: a body sent in pieces 1 s apart (under the
    2 s time-out, 3 s in all) is answered."""
    port, _ = guarded
    body = json.dumps({"input": "slow but steady"}).encode()
    head = JSON_HEAD + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head.encode())
        for piece in (body[:5], body[5:10], body[10:]):
            time.sleep(1.0)
            conn.sendall(piece)
        said = b""
        while chunk := conn.recv(65536):
            said += chunk
    assert said.startswith(b"HTTP/1.1 200"), said[:200]


# -- API keys ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["clé-secrète", "key with spaces", "tab\there", "ключ"])
def test_an_api_key_clients_cannot_send_is_refused_at_start_up(model, key):
    with pytest.raises(BadApiKeyError, match="printable ASCII without spaces"):
        create_app(model, model_name="default", api_key=key)


@pytest.mark.parametrize("where", ["option", "environment"])
@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("clé", ("'é' (U+00E9)", "printable ASCII")),
        ("", ("the API key is empty", "unset variable")),  # --api-key "$KEY" with KEY unset: an open server
    ],
)
def test_sbert_serve_refuses_such_a_key_before_taking_the_port(monkeypatch, where, key, said):
    from click.testing import CliRunner

    import sbert
    from sbert.cli import main

    loaded = []
    monkeypatch.setattr(sbert, "load", lambda *a, **k: loaded.append(a))
    port = free_port()
    options = ["serve", "--port", str(port)]
    if where == "option":
        options += ["--api-key", key]
    else:
        monkeypatch.setenv("SBERT_API_KEY", key)
    result = CliRunner().invoke(main, options)
    assert result.exit_code == 1, result.output
    assert all(words in result.output for words in said), result.output
    assert loaded == []
    with socket.socket() as free:
        free.bind(("127.0.0.1", port))  # the port was never taken
