"""One search set-up (``sbert.search.searcher``): what ``sbert search``, ``sbert serve --index`` and ``sbert eval``
search with. Its hits are ``sbert search --json``'s; a model unlike the index's is refused before it loads; the
light ONNX query encoder is taken exactly where nothing asks for more; ``SearchOptions`` alone refuses a ``lead``
with re-ranking, and the service answers that refusal with a 400."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import sbert
from sbert.backends import onnx_query
from sbert.errors import IndexMismatchError
from sbert.search.index.folder import VectorIndex
from sbert.search.retrieve import SearchOptionError, SearchOptions
from sbert.search.searcher import Searcher, open_searcher, search_model

TEXTS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Someone plays the guitar.",
    "A cat sleeps on the sofa.",
    "The stock market fell today.",
]
QUERIES = ["a guitar player", "cats asleep"]
DIM = 8


@pytest.fixture(scope="module")
def cli_built(tmp_path_factory):
    """An index of TEXTS built by ``sbert index build`` with a tiny model folder (BM25 kept, by default)."""
    from cli_index import cli_index
    from conftest import make_tiny_encoder

    return cli_index(make_tiny_encoder(dropout=0.0), TEXTS, tmp_path_factory.mktemp("searcher"))


@pytest.mark.slow  # a tiny model loaded, and the CLI run three times
@pytest.mark.parametrize("how", [[], ["--dense"], ["--hybrid", "--fusion", "rrf"]])
def test_open_searcher_finds_what_sbert_search_json_prints(cli_built, how):
    from sbert.cli import main

    printed = CliRunner().invoke(main, ["search", str(cli_built), *QUERIES, "-k", "3", "--json", *how])
    assert printed.exit_code == 0, printed.output
    searcher = open_searcher(cli_built, queries=QUERIES)
    hybrid = {"--dense": False, "--hybrid": True}.get(how[0]) if how else None
    options = searcher.options(k=3, hybrid=hybrid, fusion="rrf" if "rrf" in how else None)
    found = searcher.search(QUERIES, options)
    assert [[h.as_json() for h in hits] for hits in found] == [q["hits"] for q in json.loads(printed.stdout)]
    assert options.hybrid is (hybrid is not False)  # the index keeps BM25: hybrid unless asked for dense


def test_the_model_is_the_indexs_and_another_is_refused_before_it_loads(tmp_path, monkeypatch):
    index = VectorIndex.build(tmp_path / "ix", _vectors(), model="all-MiniLM-L6-v2", texts=TEXTS)
    assert search_model(index, None) == "all-MiniLM-L6-v2"
    assert search_model(index, "default") == "default"  # the same shipped model, by its alias
    loaded = []
    monkeypatch.setattr(sbert, "load", lambda *a, **k: loaded.append(a))
    with pytest.raises(IndexMismatchError, match=r"was built with model 'all-MiniLM-L6-v2'.*refusing to use it"):
        open_searcher(tmp_path / "ix", model=str(tmp_path))
    assert loaded == []


def test_the_service_serves_an_indexs_own_model_and_refuses_another_before_loading(tmp_path, monkeypatch):
    from sbert.serve import open_service

    VectorIndex.build(tmp_path / "ix", _vectors(), model="default", texts=TEXTS)
    monkeypatch.setattr(sbert, "load", lambda *a, **k: (_ for _ in ()).throw(_Loaded(a)))
    with pytest.raises(IndexMismatchError, match="was built with model 'all-MiniLM-L6-v2'"):
        open_service(str(tmp_path), index=str(tmp_path / "ix"))
    with pytest.raises(_Loaded) as loading:
        open_service(index=str(tmp_path / "ix"))
    assert loading.value.args[0] == ("all-MiniLM-L6-v2",)  # the index's own model, by the name it records


class _Loaded(Exception):
    """Raised by a stand-in for ``sbert.load``: the full model would have been loaded."""


class _Light:
    """A stand-in for the light ONNX query encoder an index records."""

    runtime = "onnx/fp32"

    def __init__(self, accepts: bool = True) -> None:
        self.accepted = accepts

    def accepts(self, texts) -> bool:
        return self.accepted


@pytest.mark.parametrize(
    ("options", "light"),
    [
        ({}, True),
        ({"backend": "onnx"}, True),  # chosen, but the index's own: onnx at its first precision, fp32
        ({"backend": "onnx", "precision": "fp32"}, True),
        ({"queries": None}, False),  # nothing to tell whether it embeds them as the model would
        ({"light": False}, False),
        ({"device": "cpu"}, False),
        ({"rerank": "a-cross-encoder"}, False),
        ({"prompts_given": True}, False),
        ({"backend": "torch"}, False),
        ({"backend": "onnx", "precision": "int8"}, False),
        ({"accepts": False}, False),  # a query it would cut: the full path warns
    ],
)
def test_the_light_query_encoder_is_taken_exactly_where_nothing_asks_for_more(tmp_path, monkeypatch, options, light):
    VectorIndex.build(tmp_path / "ix", _vectors(), model="default", texts=TEXTS, backend="onnx/fp32")
    recorded = _Light(options.pop("accepts", True))
    monkeypatch.setattr(onnx_query, "light_query_encoder", lambda index: recorded)
    monkeypatch.setattr(sbert, "load", lambda *a, **k: (_ for _ in ()).throw(_Loaded()))
    options = {"queries": QUERIES, **options}
    if light:
        assert open_searcher(tmp_path / "ix", **options).encoder is recorded
    else:
        with pytest.raises(_Loaded):
            open_searcher(tmp_path / "ix", **options)


def test_search_options_are_given_by_keyword_only():
    with pytest.raises(TypeError):
        SearchOptions(10)  # type: ignore[misc]
    assert SearchOptions(k=10).k == 10


def test_a_lead_with_re_ranking_is_refused_by_the_options_naming_the_lead(tmp_path):
    index = VectorIndex.build(tmp_path / "ix", _vectors(), model="default", texts=TEXTS)
    searcher = Searcher(index, encoder=None, rerank=object())
    with pytest.raises(SearchOptionError, match="does not apply to re-ranked scores") as caught:
        searcher.options(lead=0.1)
    assert caught.value.option == "lead" and isinstance(caught.value, ValueError)
    assert searcher.options(lead=0.1, rerank=False).rerank is None  # the same searcher, not re-ranking


def test_the_service_answers_the_options_refusal_with_a_400(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from sbert.serve.app import create_app
    from sbert.serve.settings import EngineSettings

    index = VectorIndex.build(tmp_path / "ix", _vectors(), model="default", texts=TEXTS)
    app = create_app(_Stub(), index=index, cross_encoder=object(), engine=EngineSettings(workers=1, max_wait_ms=1))
    with TestClient(app) as client:
        refused = client.post("/search", json={"query": "x", "rerank": True, "lead": 0.1})
        plain = client.post("/search", json={"query": "x", "lead": 0.1, "k": 1})
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["param"] == "lead"
    assert error["message"] == "lead is a dense search's cosine margin: it does not apply to re-ranked scores"
    assert plain.status_code == 200 and [h["id"] for h in plain.json()["results"][0]["hits"]] == ["1"]


def _vectors() -> np.ndarray:
    """One unit vector per text, text 1 along the stub's query vector and standing far above the rest."""
    vectors = np.eye(len(TEXTS), DIM, dtype=np.float32)
    return vectors


class _Stub:
    """A served model without weights: every text's vector is (0, 1, 0, ...)."""

    similarity_fn_name = "cosine"
    max_seq_length = 16
    dim = DIM
    runtime = "torch/fp32"
    backend_name = "torch"
    can_pack = False

    def tokenize(self, texts, prompt_name=None, prompt=None):
        from sbert.pipeline import Tokenized

        return Tokenized([[0, 1] for _ in texts], [])

    def resolve_prompt(self, prompt_name=None, prompt=None, task=None):
        return prompt

    def encode_tokenized(self, tokens, **options):
        out = np.zeros((len(tokens), DIM), dtype=np.float32)
        out[:, 1] = 1
        return out
