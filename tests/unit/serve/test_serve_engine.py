"""The service's seams: the engine (tokenise once, workers, threads, packing), request models, errors, auth."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("fastapi")
torch = pytest.importorskip("torch")

from sbert.pipeline import Tokenized  # noqa: E402
from sbert.serve.auth import authorized  # noqa: E402
from sbert.serve.engine import EmbeddingEngine, ServedEncoder, _Tagged  # noqa: E402
from sbert.serve.errors import ApiError  # noqa: E402
from sbert.serve.merging import DynamicBatcher  # noqa: E402
from sbert.serve.metrics import UNMATCHED, route_label  # noqa: E402
from sbert.serve.schemas import Context, EmbeddingRequest, SearchRequest, SimilarityRequest, parse  # noqa: E402
from sbert.serve.settings import EngineSettings, Limits  # noqa: E402

CONTEXT = Context(Limits(max_inputs=4, max_chars=50), dim=8, model_name="default", served=frozenset({"default", "m"}))


class StubEncoder:
    """A model without weights: a text's vector is (its length, 0, ...); texts over 5 words are cut."""

    similarity_fn_name = "cosine"
    max_seq_length = 5
    dim = 8
    runtime = "stub/fp32"

    def __init__(self, backend_name: str = "torch", can_pack: bool = True) -> None:
        self.backend_name, self.can_pack = backend_name, can_pack
        self.tokenized: list[list[str]] = []
        self.encoded: list[tuple[Tokenized, dict]] = []

    def tokenize(self, texts):
        self.tokenized.append(list(texts))
        ids = [list(range(min(len(t.split()), self.max_seq_length) + 2)) for t in texts]
        return Tokenized(ids, [i for i, t in enumerate(texts) if len(t.split()) > self.max_seq_length])

    def resolve_prompt(self, prompt_name=None, prompt=None, task=None):
        return prompt

    def encode_tokenized(self, tokens, **options):
        self.encoded.append((tokens, options))
        out = np.zeros((len(tokens), self.dim), dtype=np.float32)
        out[:, 0] = tokens.lengths
        return out

    def encode(self, texts, **options):
        return self.encode_tokenized(self.tokenize(texts), **options)


def embed_all(engine: EmbeddingEngine, requests: list[list[str]]):
    async def run():
        return await asyncio.gather(*(engine.embed(texts) for texts in requests))

    return asyncio.run(run())


def test_a_stub_satisfies_the_service_protocol(model):
    assert isinstance(StubEncoder(), ServedEncoder) and isinstance(model, ServedEncoder)


def test_the_engine_tokenises_each_merged_batch_once_and_splits_counts_and_truncation():
    encoder = StubEncoder()
    engine = EmbeddingEngine(encoder, EngineSettings(max_wait_ms=200, workers=1))
    try:
        long = "one two three four five six seven"
        first, second = embed_all(engine, [["a b", long], ["c d e"]])
    finally:
        engine.close()
    assert encoder.tokenized == [["a b", long, "c d e"]]  # one merged batch, tokenised once
    assert len(encoder.encoded) == 1 and encoder.encoded[0][1]["packing"] is True
    assert first.tokens.tolist() == [4, 7] and second.tokens.tolist() == [5]
    assert first.truncated.tolist() == [False, True] and first.first_truncated == 1
    assert second.first_truncated is None and first.vectors[:, 0].tolist() == [4, 7]


class OffsetStub(StubEncoder):
    """An adapter's stand-in: its vectors carry ``mark`` in the second coordinate."""

    def __init__(self, mark: float) -> None:
        super().__init__()
        self.mark = mark

    def tokenize(self, texts, prompt=None):
        return super().tokenize([f"{prompt}{t}" if prompt else t for t in texts])

    def encode_tokenized(self, tokens, **options):
        out = super().encode_tokenized(tokens, **options)
        out[:, 1] = self.mark
        return out


def test_adapters_share_the_engines_workers_but_each_batch_runs_one_adapter():
    base, a, b = StubEncoder(), OffsetStub(1.0), OffsetStub(2.0)
    engine = EmbeddingEngine(base, EngineSettings(max_wait_ms=200, workers=1), adapters={"a": a, "b": b})
    lane = engine.lane("b")
    assert lane.encoder is b

    async def run():
        asked = [engine.embed(["x y"], adapter="a"), engine.embed(["p"]), lane.embed(["q r s", "t"]), engine.embed([])]
        return await asyncio.gather(*asked, engine.embed(["u v"], prompt="query: ", adapter="a"))

    try:
        for_a, for_base, for_b, empty, prompted = asyncio.run(run())
    finally:
        engine.close()
    assert engine.batcher.stats.batches == 3  # a batch per adapter (and one for the base) ...
    assert a.tokenized == [["x y"], ["query: u v"]]  # tokenised once per run of one prompt
    assert b.tokenized == [["q r s", "t"]] and base.tokenized == [[], ["p"]]  # (the request without texts first)
    assert [len(t) for t, _ in a.encoded] == [2]  # ... each run as one call, a's two requests together
    assert for_a.vectors[:, :2].tolist() == [[4, 1]] and for_base.vectors[:, :2].tolist() == [[3, 0]]
    assert for_b.vectors[:, :2].tolist() == [[5, 2], [3, 2]] and for_b.tokens.tolist() == [5, 3]
    assert empty.vectors.shape == (0, 8) and prompted.vectors[0, :2].tolist() == [5, 1]
    with pytest.raises(KeyError, match="no adapter 'c'"):
        engine.lane("c")
    mixed = [_Tagged("x", None, "a"), _Tagged("y", None, "b")]
    with pytest.raises(RuntimeError, match=r"several adapters: \['a', 'b'\]"):
        engine._run_batch(mixed)


def test_the_batcher_fills_each_batch_with_one_key_oldest_first():
    batches: list[list[str]] = []

    def encode(texts):
        batches.append(list(texts))
        return np.zeros((len(texts), 1), dtype=np.float32)

    batcher = DynamicBatcher(encode, max_batch_texts=3, max_wait_ms=200)

    async def run():
        keys = ["a", "b", "a", "b", "a", None, "a"]
        return await asyncio.gather(*(batcher.embed([f"{k}{i}"], key=k) for i, k in enumerate(keys)))

    try:
        asyncio.run(run())
    finally:
        batcher.close()
    # a's first three, then the oldest left (b's two), None's, and a's fourth in a batch of its own
    assert batches == [["a0", "a2", "a4"], ["b1", "b3"], ["None5"], ["a6"]]


def test_an_adapter_of_another_size_is_refused_a_place_in_the_bases_batches():
    other = OffsetStub(1.0)
    other.dim = 4
    with pytest.raises(ValueError, match="adapter 'x' gives 4-d vectors, the base 8-d"):
        EmbeddingEngine(StubEncoder(), adapters={"x": other})


def test_the_served_model_is_tokenised_once_per_batch(model, monkeypatch):
    calls = []
    tokenize = model.transformer.tokenize
    monkeypatch.setattr(model.transformer, "tokenize", lambda texts: calls.append(len(texts)) or tokenize(texts))
    engine = EmbeddingEngine(model, EngineSettings(max_wait_ms=100, workers=1))
    try:
        texts = ["A man is playing a guitar.", "word " * 400, "Hi"]
        (got,) = embed_all(engine, [texts])
    finally:
        engine.close()
    assert calls == [3]  # not again inside the model run
    expected = model.encode(texts, on_truncation="ignore")
    assert np.abs(got.vectors - expected).max() <= 1e-5
    assert got.tokens.tolist() == [len(i) for i in tokenize(texts)[0]] and got.first_truncated == 1


@pytest.mark.parametrize("backend, workers", [("torch", 2), ("onnx", 1)])
def test_workers_default_by_backend_and_threads_come_back_at_close(backend, workers):
    before = torch.get_num_threads()
    engine = EmbeddingEngine(StubEncoder(backend, can_pack=backend == "torch"))
    try:
        assert engine.workers == workers and len(engine.batcher._threads) == workers
        expected = max(1, before // 2) if backend == "torch" else before
        assert torch.get_num_threads() == expected
    finally:
        engine.close()
    assert torch.get_num_threads() == before


def test_packing_by_default_where_the_encoder_can_and_refused_where_it_cannot():
    assert EmbeddingEngine(StubEncoder("onnx", can_pack=False), EngineSettings(workers=1)).packing is False
    with pytest.raises(ValueError, match="packing needs the torch backend"):
        EmbeddingEngine(StubEncoder("onnx", can_pack=False), EngineSettings(packing=True, workers=1))


@pytest.mark.parametrize(
    "body, status, param, code, message",
    [
        (b'{"input": ["ok", 3.5]}', 400, "input", None, "'input[1]' must be a string (float)"),
        (
            b'{"input": ["ok", ""]}',
            400,
            "input",
            "empty_input",
            "'input[1]' is empty; empty strings cannot be embedded",
        ),
        (
            b'{"input": ["a", "b", "c", "d", "e"]}',
            400,
            "input",
            "too_many_inputs",
            "'input' has 5 items; the limit is 4",
        ),
        (b'{"input": "' + b"x" * 51 + b'"}', 400, "input", "input_too_long", "'input[0]' has 51 characters"),
        (b'{"input": "\\ud800"}', 400, "input", "invalid_input", "'input[0]' is not valid Unicode text"),
        (b'{"input": "x", "dimensions": 9}', 400, "dimensions", None, "'dimensions' must be an integer from 1 to 8"),
        (b'{"input": "x", "encoding_format": "f"}', 400, "encoding_format", None, "must be 'float' or 'base64'"),
        (b'{"input": "x", "truncate": 0}', 400, "truncate", None, "'truncate' must be true or false"),
        (b'{"input": "x", "model": "gpt"}', 404, "model", "model_not_found", "the model 'gpt' does not exist here"),
        (b'{"model": "gpt", "input": 5}', 404, "model", "model_not_found", "'gpt'"),  # the model is checked first
        (b'{"input": "x", "dimensions": ' + b"1" * 101 + b"}", 400, None, None, "integer of 101 digits"),
        (b"[" * 100_000, 400, None, "too_many_values", "more JSON values (strings, numbers, arrays, objects"),
        (b'{"input": ["x"' + b', "x"' * 80 + b"]}", 400, None, "too_many_values", "the limit of 72 a request"),
        (b'{"input": ["' + b"x, [{" * 80 + b'"]}', 400, "input", "input_too_long", "'input[0]' has 400 characters"),
        (b"[1]", 400, None, None, "request body must be a JSON object"),
    ],
)
def test_request_errors_name_the_field_with_status_and_code(body, status, param, code, message):
    with pytest.raises(ApiError) as caught:
        parse(body, EmbeddingRequest, CONTEXT)
    error = caught.value.body()["error"]
    assert caught.value.status == status and error["param"] == param and error["code"] == code
    assert message in error["message"], error["message"]


def test_request_models_fill_defaults_and_check_across_fields():
    request = parse(b'{"input": "hello", "model": "m"}', EmbeddingRequest, CONTEXT)
    assert (request.input, request.model, request.encoding_format, request.dimensions, request.truncate) == (
        ["hello"],
        "m",
        "float",
        None,
        True,
    )
    search = parse(b'{"query": ["a", "b"]}', SearchRequest, CONTEXT)
    assert (search.k, search.candidates, search.rerank, search.method) == (10, 100, False, None)
    with pytest.raises(ApiError, match="'k' must be an integer from 1 to 1000"):
        parse(b'{"query": "a", "k": true}', SearchRequest, CONTEXT)
    with pytest.raises(ApiError, match="same length") as caught:
        parse(b'{"a": ["x"], "b": ["y", "z"], "mode": "pairwise"}', SimilarityRequest, CONTEXT)
    assert caught.value.param == "b"


def test_auth_opens_only_health_and_metrics():
    good, bad = {b"authorization": b"Bearer key"}, {b"authorization": b"Bearer nope"}
    assert authorized("key", "/v1/embeddings", good) and not authorized("key", "/v1/embeddings", bad)
    assert not authorized("key", "/search", {}) and authorized(None, "/search", {})
    assert authorized("key", "/health", {}) and authorized("key", "/metrics", {})


def test_served_bodies_keep_the_response_models(model):
    from fastapi.testclient import TestClient

    from sbert.serve.app import create_app
    from sbert.serve.responses import EmbeddingResponse, ErrorResponse, Health, SimilarityResponse

    app = create_app(model, engine=EngineSettings(workers=1, max_wait_ms=1))
    with TestClient(app) as client:
        for fmt in ("float", "base64"):
            body = client.post("/v1/embeddings", json={"input": ["a", "b c"], "encoding_format": fmt}).json()
            assert len(EmbeddingResponse.model_validate(body).data) == 2
        SimilarityResponse.model_validate(client.post("/similarity", json={"a": ["x", "y"]}).json())
        Health.model_validate(client.get("/health").json())
        ErrorResponse.model_validate(client.post("/search", json={"query": "x"}).json())  # no index: 404
        assert route_label(app.router.routes, {"type": "http", "path": "/nope", "method": "GET"}) == UNMATCHED
        assert route_label(app.router.routes, {"type": "http", "path": "/search", "method": "POST"}) == "/search"
