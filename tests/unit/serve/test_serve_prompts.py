"""Prompts in the service: /v1/embeddings takes ``prompt_name`` or ``prompt``, /search embeds queries with the
query prompt, and requests with different prompts merged into one batch each get their own."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("torch")

import sbert
from sbert.pipeline import Tokenized
from sbert.serve.engine import EmbeddingEngine, ServedEncoder
from sbert.serve.errors import ApiError
from sbert.serve.schemas import Context, EmbeddingRequest, parse
from sbert.serve.settings import EngineSettings, Limits

PROMPTS = {"query": "query: ", "passage": "passage: ", "classify": "classify this: "}
TEXTS = ["A man is playing a flute.", "Two dogs run through a field.", "Stocks fell sharply."]


class PromptStub:
    """A model without weights: a text's vector is (its words, prompt words, 0 ...); over 6 words is cut."""

    similarity_fn_name = "cosine"
    max_seq_length = 6
    dim = 4
    runtime = "stub/fp32"
    backend_name = "torch"
    can_pack = False

    def __init__(self) -> None:
        self.tokenized: list[tuple[list[str], str | None]] = []
        self.encoded: list[Tokenized] = []

    def resolve_prompt(self, prompt_name=None, prompt=None, task=None):
        return prompt

    def tokenize(self, texts, prompt_name=None, prompt=None):
        self.tokenized.append((list(texts), prompt))
        words = [len(((prompt or "") + t).split()) for t in texts]
        prompt_words = len((prompt or "").split())
        return Tokenized(
            [list(range(min(n, self.max_seq_length))) for n in words],
            [i for i, n in enumerate(words) if n > self.max_seq_length],
            [prompt_words] * len(texts) if prompt else None,
        )

    def encode_tokenized(self, tokens, **options):
        self.encoded.append(tokens)
        out = np.zeros((len(tokens), self.dim), dtype=np.float32)
        out[:, 0] = tokens.lengths
        out[:, 1] = tokens.prompt_lengths or 0
        return out

    def encode(self, texts, **options):
        return self.encode_tokenized(self.tokenize(texts), **options)


def test_requests_with_different_prompts_share_a_batch_and_keep_their_prompts():
    encoder = PromptStub()
    assert isinstance(encoder, ServedEncoder)
    engine = EmbeddingEngine(encoder, EngineSettings(max_wait_ms=300, workers=1))
    requests = [(["a b", "c"], None), (["d e f g h", "i"], "two words "), (["j"], None)]

    async def run():
        return await asyncio.gather(*(engine.embed(texts, prompt) for texts, prompt in requests))

    try:
        plain, prompted, last = asyncio.run(run())
    finally:
        engine.close()
    assert encoder.tokenized == [(["a b", "c"], None), (["d e f g h", "i"], "two words "), (["j"], None)]
    assert all(type(t) is str for texts, _ in encoder.tokenized for t in texts)  # the batcher's wrappers are gone
    assert len(encoder.encoded) == 1  # one merged batch, embedded once
    assert encoder.encoded[0].prompt_lengths == [0, 0, 2, 2, 0]  # 0 for the texts without a prompt
    assert encoder.encoded[0].truncated == [2]  # "two words d e f g h": 7 words, cut; its place in the batch
    assert plain.tokens.tolist() == [2, 1] and plain.vectors[:, 1].tolist() == [0, 0]
    assert prompted.tokens.tolist() == [6, 3] and prompted.vectors[:, 1].tolist() == [2, 2]
    assert prompted.truncated.tolist() == [True, False] and last.tokens.tolist() == [1]


CONTEXT = Context(Limits(max_chars=20), dim=8)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"input": "x", "prompt_name": 3}, "prompt_name", "'prompt_name' must be a string"),
        ({"input": "x", "prompt": ["a"]}, "prompt", "'prompt' must be a string"),
        ({"input": "x", "prompt": "p" * 21}, "prompt", "'prompt' has 21 characters; the limit is 20"),
        ({"input": "x", "prompt": "p: ", "prompt_name": "query"}, "prompt", "give 'prompt' or 'prompt_name', not both"),
    ],
)
def test_bad_prompt_fields_are_refused_naming_the_field(body, param, message):
    with pytest.raises(ApiError) as caught:
        parse(json.dumps(body).encode(), EmbeddingRequest, CONTEXT)
    assert caught.value.status == 400 and caught.value.param == param and caught.value.message == message


def test_prompt_fields_are_optional():
    request = parse(b'{"input": "x", "prompt": ""}', EmbeddingRequest, CONTEXT)
    assert request.prompt == "" and request.prompt_name is None


# -- the served model ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def prompted(model, tmp_path_factory):
    """The default model with prompts and a default one, loaded by sbert."""
    folder = Path(shutil.copytree(model.path, tmp_path_factory.mktemp("serve-prompts") / "prompted"))
    config = folder / "config_sentence_transformers.json"
    config.write_text(
        json.dumps(json.loads(config.read_text()) | {"prompts": PROMPTS, "default_prompt_name": "classify"})
    )
    return sbert.load(folder, device="cpu")


@pytest.fixture(scope="module")
def client(prompted, tmp_path_factory):
    from fastapi.testclient import TestClient

    from sbert.search.index.folder import VectorIndex
    from sbert.serve.app import create_app

    folder = tmp_path_factory.mktemp("serve-prompts") / "index"
    index = VectorIndex.build(folder, prompted.encode_document(TEXTS), model=str(prompted.path), texts=TEXTS)
    app = create_app(prompted, index=index, engine=EngineSettings(workers=1, max_wait_ms=1))
    with TestClient(app) as served:
        yield served


def _vectors(client, **body) -> np.ndarray:
    response = client.post("/v1/embeddings", json={"input": TEXTS, "encoding_format": "float", **body})
    assert response.status_code == 200, response.text
    return np.array([d["embedding"] for d in response.json()["data"]], dtype=np.float32)


def test_embeddings_take_a_prompt_as_the_library_does(client, prompted):
    np.testing.assert_allclose(_vectors(client), prompted.encode(TEXTS), atol=1e-5)  # the default prompt
    np.testing.assert_allclose(_vectors(client, prompt_name="query"), prompted.encode_query(TEXTS), atol=1e-5)
    np.testing.assert_allclose(_vectors(client, prompt="x: "), prompted.encode(TEXTS, prompt="x: "), atol=1e-5)
    np.testing.assert_allclose(_vectors(client, prompt=""), prompted.encode(TEXTS, prompt=""), atol=1e-5)
    assert np.abs(_vectors(client, prompt="") - _vectors(client)).max() > 1e-2
    usage = client.post("/v1/embeddings", json={"input": TEXTS[0], "prompt_name": "query"}).json()["usage"]
    assert usage["prompt_tokens"] == len(prompted.tokenize(TEXTS[:1], prompt_name="query").ids[0])  # prompt counted


def test_an_unknown_prompt_name_is_a_400_naming_the_prompts(client):
    response = client.post("/v1/embeddings", json={"input": TEXTS, "prompt_name": "qeury"})
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "prompt_name" and error["code"] == "unknown_prompt"
    assert "'qeury' is not one of" in error["message"] and "'passage'" in error["message"]


def test_search_embeds_its_query_with_the_query_prompt(client, prompted):
    query = "someone plays music"
    hits = client.post("/search", json={"query": query, "k": 3}).json()["results"][0]["hits"]
    documents, vector = prompted.encode_document(TEXTS), prompted.encode_query(query)
    expected = documents @ vector / np.linalg.norm(documents, axis=1) / np.linalg.norm(vector)
    assert [h["score"] for h in sorted(hits, key=lambda h: h["id"])] == pytest.approx(expected.tolist(), abs=1e-5)
