"""Retrievers for the retrieval evaluation: windows of long documents, BM25 alone, dense fused with BM25."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from test_beir import write_beir

from sbert.cli import main
from sbert.data.beir import Document, RetrievalCollection, read_beir
from sbert.evaluation.retrieval import RetrievalEvaluator
from sbert.evaluation.retrievers import (
    HybridRetriever,
    IndexRetriever,
    LexicalRetriever,
    RerankRetriever,
    RetrievalSettings,
)
from sbert.windows import Chunking

DOCS = [
    Document("d1", "Bread", "Knead the dough, let it rise and bake it in a hot oven."),
    Document("d2", "Football", "The match ended in a draw after extra time."),
    Document("d3", "", "A cat sleeps on the warm windowsill all afternoon."),
    Document("d4", "Sourdough", "Sourdough bread needs a starter of flour and water."),
]


class Fixed:
    """A retriever that answers every query with the same hits: the dense side of a hand-computed fusion."""

    def __init__(self, hits):
        self.hits = hits

    def index(self, model, documents, show_progress=None):
        pass

    def search(self, model, queries, k):
        return [self.hits[:k] for _ in queries]


def test_lexical_retriever_ranks_documents_that_share_the_querys_words():
    retriever = LexicalRetriever()
    retriever.index(None, DOCS)
    [hits] = retriever.search(None, ["sourdough bread starter"], 10)
    assert [doc for doc, _ in hits][:2] == ["d4", "d1"]
    assert all(score > 0 for _, score in hits) and {doc for doc, _ in hits} == {"d1", "d4"}


class WordOverlap:
    """A one-label pair scorer: how many of the query's words the document has."""

    num_labels = 1

    def __init__(self):
        self.pairs = []

    def predict(self, pairs, batch_size=32, show_progress=None):
        self.pairs += pairs
        return np.array([len(set(q.lower().split()) & set(d.lower().split())) for q, d in pairs], dtype=np.float32)


def test_rerank_retriever_rescores_the_first_stages_candidates_only():
    first = Fixed([("d2", 0.9), ("d3", 0.8), ("d1", 0.7), ("d4", 0.1)])
    scorer = WordOverlap()
    reranked = RerankRetriever(first, scorer, candidates=3)
    reranked.index(None, DOCS)
    [hits] = reranked.search(None, ["bake the bread in a hot oven"], 3)
    # candidates d2, d3, d1 (d4 lies beyond them); words shared with the query: d1 6 (bread, the, bake, in,
    # a, hot: "oven." keeps its full stop), d2 3 (the, in, a), d3 2 (a, the)
    assert hits == [("d1", 6.0), ("d2", 3.0), ("d3", 2.0)]
    assert [d for _, d in scorer.pairs] == [DOCS[1].joined(" "), DOCS[2].joined(" "), DOCS[0].joined(" ")]
    assert [doc for doc, _ in reranked.search(None, ["bake the bread in a hot oven"], 1)[0]] == ["d1"]
    with pytest.raises(ValueError, match="candidates"):
        RerankRetriever(first, scorer, candidates=0)
    settings = RetrievalSettings(lexical=True, rerank=scorer, candidates=2)
    made = settings.retriever()
    assert isinstance(made, RerankRetriever) and isinstance(made.first, LexicalRetriever) and made.candidates == 2
    with pytest.raises(ValueError, match="candidates apply to re-ranking"):
        RetrievalSettings(candidates=5)


def test_reciprocal_rank_fusion_by_hand():
    dense = Fixed([("d2", 0.9), ("d1", 0.8), ("d3", 0.1)])
    hybrid = HybridRetriever(dense, fusion="rrf", candidates=3)
    hybrid.index(None, DOCS)
    [hits] = hybrid.search(None, ["sourdough bread starter"], 4)
    # BM25 ranks d4 first, d1 second; dense ranks d2, d1, d3. RRF with k = 60:
    expected = {
        "d1": 1 / 62 + 1 / 62,
        "d2": 1 / 61,
        "d4": 1 / 61,
        "d3": 1 / 63,
    }
    assert [doc for doc, _ in hits] == ["d1", "d2", "d4", "d3"]  # d2 and d4 tie: lower row (id) first
    for doc, score in hits:
        assert score == pytest.approx(expected[doc], rel=1e-6)


def test_weighted_fusion_by_hand():
    dense = Fixed([("d2", 0.9), ("d1", 0.5), ("d3", 0.1)])
    hybrid = HybridRetriever(dense, fusion="weighted", alpha=0.25, candidates=3)
    hybrid.index(None, DOCS)
    [hits] = hybrid.search(None, ["sourdough bread starter"], 4)
    lexical = LexicalRetriever()
    lexical.index(None, DOCS)
    [(top, high), (_, low)] = lexical.search(None, ["sourdough bread starter"], 2)[0]
    assert top == "d4"
    # dense min-max over its candidates: d2 1, d1 0.5, d3 0; BM25: d4 1, d1 0.
    expected = {"d2": 0.25, "d1": 0.25 * 0.5 + 0.75 * (low - low) / (high - low), "d4": 0.75, "d3": 0.0}
    for doc, score in hits:
        assert score == pytest.approx(expected[doc], abs=1e-6)
    assert hits[0][0] == "d4"


def test_bad_fusion_is_refused():
    with pytest.raises(ValueError, match="fusion must be one of rrf, weighted"):
        HybridRetriever(fusion="max")


@pytest.mark.slow
def test_documents_within_one_window_score_as_the_dense_retriever(model):
    dense, chunked = IndexRetriever(), IndexRetriever(RetrievalSettings(chunk=True, mode="maxp"))
    for retriever in (dense, chunked):
        retriever.index(model, DOCS)
    queries = ["how to bake bread", "who won the game", "a sleeping cat"]
    for ours, theirs in zip(chunked.search(model, queries, 4), dense.search(model, queries, 4), strict=True):
        assert [hit.id for hit in ours] == [hit.id for hit in theirs]
        for a, b in zip(ours, theirs, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-5)


@pytest.mark.slow
def test_evaluator_with_a_chunked_hybrid_retriever_finds_the_long_documents_passage(model):
    """One window in three holds the answer: its best window (maxp) finds it; the mean of its windows may not."""
    filler = " ".join(f"Unrelated sentence number {i} about the weather and the trains." for i in range(60))
    docs = [*DOCS, Document("long", "Report", filler + " The telescope found a new comet near Jupiter.")]
    collection = RetrievalCollection(
        "toy", "test", {d.id: d for d in docs}, {"q1": "comet discovered near Jupiter"}, {"q1": {"long": 1}}
    )
    truncated = RetrievalEvaluator(collection, latency_queries=0)(model)
    maxp = RetrievalSettings(chunk=True, mode="maxp")
    chunked = RetrievalEvaluator(collection, retriever=IndexRetriever(maxp), latency_queries=0)(model)
    hybrid = RetrievalEvaluator(collection, retriever=IndexRetriever(maxp.with_hybrid("rrf", None)), latency_queries=1)(
        model
    )
    assert model.max_seq_length == 256 and len(model.tokenize([docs[-1].joined()]).truncated) == 1
    assert chunked["mrr@10"] == 100 > truncated["mrr@10"]
    assert hybrid["mrr@10"] == 100 and hybrid["query_ms_p50"] > 0


def test_retrieval_settings_make_the_retriever_they_name():
    # every way but BM25 alone runs through the index code (IndexRetriever), with the settings given
    assert isinstance(RetrievalSettings().retriever(), IndexRetriever)
    chunked = RetrievalSettings(chunk=True, mode="maxp", window=64, overlap=8).retriever()
    assert isinstance(chunked, IndexRetriever) and chunked.settings.chunking() == Chunking(64, 8, "maxp")
    hybrid = RetrievalSettings(chunk=True, hybrid=True, fusion="rrf").retriever()
    options = hybrid.settings.search_options(10)
    assert options.hybrid and options.fusion == "rrf" and hybrid.settings.chunk
    assert options.mode is None  # the index's own
    assert isinstance(RetrievalSettings(lexical=True).retriever(), LexicalRetriever)
    assert RetrievalSettings().retriever() is not RetrievalSettings().retriever()  # fresh per evaluation
    with pytest.raises(ValueError, match="BM25 alone"):
        RetrievalSettings(lexical=True, hybrid=True)
    with pytest.raises(ValueError, match="ask for chunking too"):
        RetrievalSettings(mode="maxp")
    with pytest.raises(ValueError, match="ask for it too"):
        RetrievalSettings(alpha=0.3)


def test_sbert_eval_refuses_settings_without_their_switch(tmp_path):
    folder = write_beir(tmp_path / "tiny")
    result = CliRunner().invoke(main, ["eval", "--retrieval", str(folder), "--dense", "--fusion", "rrf"])
    assert result.exit_code == 2 and "fusion and alpha apply to hybrid search" in result.output
    result = CliRunner().invoke(main, ["eval", "--retrieval", str(folder), "--bm25", "--chunk"])
    assert result.exit_code == 2 and "BM25 alone (--bm25) takes neither" in result.output


@pytest.mark.slow
def test_sbert_eval_retrieves_as_its_options_say(model, tmp_path):
    folder = write_beir(tmp_path / "tiny")
    collection = read_beir(folder)
    windows = RetrievalSettings(chunk=True, mode="maxp", window=8, overlap=2)
    for options, retriever in (
        (["--chunk", "--mode", "maxp", "--window", "8", "--overlap", "2", "--dense"], IndexRetriever(windows)),
        (["--dense"], IndexRetriever()),
        (
            [],
            IndexRetriever(RetrievalSettings(hybrid=True, fusion="weighted", alpha=0.7)),
        ),  # as a default index is searched
        (["--hybrid", "--fusion", "rrf"], IndexRetriever(RetrievalSettings(hybrid=True, fusion="rrf"))),
        (["--bm25"], LexicalRetriever()),
    ):
        out = tmp_path / "scores.json"
        result = CliRunner().invoke(main, ["eval", "--retrieval", str(folder), *options, "--json", str(out)])
        assert result.exit_code == 0, result.output
        scores = json.loads(out.read_text())["tasks"]["tiny"]
        expected = RetrievalEvaluator(collection, retriever=retriever, latency_queries=0)(model)
        for key in ("ndcg@10", "mrr@10", "recall@100"):
            assert scores[key] == pytest.approx(expected[key], abs=1e-6), (options, key)
