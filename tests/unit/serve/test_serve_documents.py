"""/search over an index of documents (documents with their best passage) and hybrid search, in-process
with a weightless stub encoder whose every query vector is (0, 1, 0, ...)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("bm25s")

from fastapi.testclient import TestClient

from sbert.pipeline import Tokenized
from sbert.search.index.folder import Documents, VectorIndex
from sbert.serve.app import create_app
from sbert.serve.settings import EngineSettings

DIM = 8
PASSAGES = ["the cat sat", "on the mat", "dogs bark at cats", "an empty kitchen"]


class QueryStub:
    """A model without weights: every text's vector is (0, 1, 0, ...)."""

    similarity_fn_name = "cosine"
    max_seq_length = 16
    dim = DIM
    runtime = "stub/fp32"
    backend_name = "torch"
    can_pack = False

    def tokenize(self, texts):
        return Tokenized([[0, 1] for _ in texts], [])

    def resolve_prompt(self, prompt_name=None, prompt=None, task=None):
        return prompt

    def encode_tokenized(self, tokens, **options):
        out = np.zeros((len(tokens), DIM), dtype=np.float32)
        out[:, 1] = 1
        return out

    def encode(self, texts, **options):
        return self.encode_tokenized(self.tokenize(texts))


def _windows() -> np.ndarray:
    x = np.zeros((4, DIM), dtype=np.float32)
    x[:, :2] = [[1, 0], [0, 1], [0.8, 0.6], [0, -1]]  # A: 2 windows, B, C
    return x


@pytest.fixture
def client(tmp_path):
    def make(**options):
        index = VectorIndex.build(tmp_path / str(len(options)), _windows(), model="default", texts=PASSAGES, **options)
        app = create_app(QueryStub(), index=index, engine=EngineSettings(workers=1, max_wait_ms=1))
        return TestClient(app)

    return make


def _documents() -> Documents:
    return Documents(
        ["A", "A", "B", "C"], np.array([[0, 11], [8, 18], [0, 17], [0, 16]]), window=4, overlap=1, mode="mean"
    )


def test_search_returns_documents_with_the_best_passage_and_its_span(client):
    with client(documents=_documents(), bm25=True) as http:
        hits = http.post("/search", json={"query": "x", "k": 3, "hybrid": False}).json()["results"][0]["hits"]
        assert [h["id"] for h in hits] == ["A", "B", "C"]
        # the index's mode (mean, as built): A's mean window (0.5, 0.5) at unit length; its closest window
        assert hits[0] == {  # its cosine: the dense score, the mean vector's
            "id": "A", "score": pytest.approx(2**-0.5), "cosine": pytest.approx(2**-0.5), "text": "on the mat",
            "span": [8, 18],
        }  # fmt: skip
        maxp = {"query": "x", "k": 1, "mode": "maxp", "hybrid": False}
        maxp = http.post("/search", json=maxp).json()["results"][0]["hits"]
        assert maxp[0]["id"] == "A" and maxp[0]["score"] == pytest.approx(1.0)
        # given no option, an index that keeps BM25 is searched as sbert search does: hybrid, weighted 0.7
        default = http.post("/search", json={"query": "kitchen", "k": 3}).json()["results"][0]["hits"]
        fused = {"query": "kitchen", "k": 3, "hybrid": True, "fusion": "weighted", "alpha": 0.7}
        assert default == http.post("/search", json=fused).json()["results"][0]["hits"]
        assert default != hits
        lexical = {"query": "kitchen", "k": 1, "hybrid": True, "fusion": "weighted", "alpha": 0}
        assert http.post("/search", json=lexical).json()["results"][0]["hits"][0]["id"] == "C"
        rrf = {"query": "kitchen", "k": 3, "hybrid": True, "fusion": "rrf"}
        rrf = http.post("/search", json=rrf).json()["results"][0]["hits"]
        assert [h["id"] for h in rrf] == ["C", "A", "B"]  # C: 1/61 + 1/63 (BM25 first, dense third)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"hybrid": True}, "hybrid", "no BM25 index"),
        ({"mode": "mean"}, "mode", "'mode' applies to an index of documents"),
        ({"fusion": "sum"}, "fusion", "'fusion' must be 'rrf' or 'weighted'"),
        ({"alpha": 1.5}, "alpha", "'alpha' must be a number from 0 to 1"),
        ({"alpha": "0.5"}, "alpha", "'alpha' must be a number from 0 to 1"),
        ({"mode": "best"}, "mode", "'mode' must be 'maxp' or 'mean'"),
        ({"threshold": "0.5"}, "threshold", "'threshold' must be a finite number (a cosine)"),
        ({"lead": "0.5"}, "lead", "'lead' must be a finite number (a cosine margin)"),
    ],
)
def test_bad_search_settings_are_refused_naming_the_field(client, body, param, message):
    with client() as http:  # an index of texts without BM25
        response = http.post("/search", json={"query": "x", **body})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"] == param and message in error["message"], error


def test_an_index_of_texts_answers_as_before(client):
    with client() as http:
        hits = http.post("/search", json={"query": "x", "k": 2}).json()["results"][0]["hits"]
        assert hits == [
            {"id": "1", "score": pytest.approx(1.0), "cosine": pytest.approx(1.0), "text": "on the mat"},
            {"id": "2", "score": pytest.approx(0.6), "cosine": pytest.approx(0.6), "text": "dogs bark at cats"},
        ]


def test_a_threshold_keeps_the_hits_at_least_that_similar_from_a_dense_search(client):
    with client() as http:  # "x" against the texts: 1.0, 0.6, 0.0, -1.0
        found = http.post("/search", json={"query": ["x", "y"], "k": 4, "threshold": 0.5}).json()["results"]
        assert [[h["id"] for h in r["hits"]] for r in found] == [["1", "2"], ["1", "2"]]
        none = http.post("/search", json={"query": "x", "threshold": 1.5}).json()["results"]
        assert none == [{"query": "x", "hits": []}]  # nothing reaches it: an empty answer, not an error
    with client(documents=_documents(), bm25=True) as http:  # searched hybrid by default; dense with a threshold
        dense = http.post("/search", json={"query": "kitchen", "k": 3, "hybrid": False}).json()["results"][0]["hits"]
        kept = http.post("/search", json={"query": "kitchen", "k": 3, "threshold": 0.5}).json()["results"][0]["hits"]
        assert kept == [h for h in dense if h["score"] >= 0.5] and [h["id"] for h in kept] == ["A", "B"]


def test_a_lead_keeps_the_top_hit_only_where_it_stands_out(client):
    with client() as http:  # "x" against the texts: 1.0, then 0.6, 0.0, -1.0 (mean -0.133): a lead of 1.133
        found = http.post("/search", json={"query": "x", "k": 4, "lead": 1.1}).json()["results"][0]["hits"]
        assert [(h["id"], h["score"]) for h in found] == [("1", pytest.approx(1.0))]
        assert found[0]["lead"] == pytest.approx(1.0 - (0.6 + 0.0 - 1.0) / 3)
        assert "lead" not in http.post("/search", json={"query": "x", "k": 1}).json()["results"][0]["hits"][0]
        assert http.post("/search", json={"query": "x", "lead": 1.2}).json()["results"] == [{"query": "x", "hits": []}]
