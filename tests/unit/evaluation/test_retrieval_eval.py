"""Retrieval evaluation: the metrics by hand, the retriever seam, equivalence with sentence-transformers'
InformationRetrievalEvaluator on a SciFact slice, and ``sbert eval --retrieval`` on a tiny folder."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from click.testing import CliRunner
from test_beir import write_beir

from sbert.cli import main
from sbert.data.beir import Document, RetrievalCollection, read_beir
from sbert.data.paths import data_dir
from sbert.errors import InputFileError
from sbert.evaluation.retrieval import (
    RetrievalEvaluator,
    Retriever,
    accuracy_at_k,
    map_at_k,
    mrr_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    retrieval_metrics,
)
from sbert.evaluation.retrievers import IndexRetriever, RetrievalSettings

RANKED = ["a", "b", "c", "d", "e"]
RELEVANT = {"b", "d", "x"}  # x is never retrieved


@pytest.mark.parametrize(
    ("metric", "k", "expected"),
    [
        (accuracy_at_k, 1, 0.0),
        (accuracy_at_k, 2, 1.0),
        (precision_at_k, 5, 0.4),
        (precision_at_k, 10, 0.2),  # divides by k even though only 5 are ranked
        (recall_at_k, 1, 0.0),
        (recall_at_k, 5, 2 / 3),
        (mrr_at_k, 1, 0.0),
        (mrr_at_k, 10, 0.5),
        (ndcg_at_k, 2, 0.38685280723454163),  # (1/log2 3) / (1 + 1/log2 3)
        (ndcg_at_k, 5, 0.49818925746641285),  # (1/log2 3 + 1/log2 5) / (1 + 1/log2 3 + 1/log2 4)
        (map_at_k, 2, 0.25),  # (1/2) / min(2, 3)
        (map_at_k, 5, 1 / 3),  # (1/2 + 2/4) / min(5, 3)
    ],
)
def test_metrics_by_hand(metric, k, expected):
    assert metric(RANKED, RELEVANT, k) == pytest.approx(expected, abs=1e-12)


def test_a_perfect_ranking_scores_one_even_with_more_relevant_documents_than_k():
    relevant = {"r1", "r2", "r3", "r4"}
    for metric in (ndcg_at_k, map_at_k, precision_at_k, accuracy_at_k, mrr_at_k):
        assert metric(["r1", "r2", "n"], relevant, 2) == pytest.approx(1.0)
    assert recall_at_k(["r1", "r2", "n"], relevant, 2) == 0.5
    assert ndcg_at_k(["n", "m"], relevant, 2) == map_at_k([], relevant, 10) == 0.0


def test_ndcg_with_one_relevant_document_is_one_over_log2_of_rank_plus_one():
    """The case ``sbert.search.auto`` scores its held-out pseudo-queries with (one relevant document each)."""
    assert ndcg_at_k(["a", "b", "c"], {"a"}, 10) == 1.0
    assert ndcg_at_k(["b", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3), abs=1e-12)
    assert ndcg_at_k(["b", "c", "d", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(5), abs=1e-12)
    assert ndcg_at_k([str(i) for i in range(10)] + ["a"], {"a"}, 10) == 0.0  # ranked 11th: outside the top 10


def test_means_leave_out_queries_without_relevant_documents_and_count_missing_rankings_as_empty():
    rankings = {"q1": ["a", "b"], "q2": ["c", "d"], "q3": ["a"]}
    relevant = {"q1": {"b"}, "q2": {"c"}, "q3": set(), "q4": {"a"}}  # q3: nothing relevant; q4: no ranking
    out = retrieval_metrics(rankings, relevant, {"mrr": (10,), "recall": (1, 2)})
    assert out == pytest.approx({"mrr@10": (0.5 + 1 + 0) / 3, "recall@1": 1 / 3, "recall@2": 2 / 3})
    with pytest.raises(ValueError, match="unknown retrieval metrics \\['hits'\\]"):
        retrieval_metrics(rankings, relevant, {"hits": (1,)})
    with pytest.raises(ValueError, match="no query has a relevant document"):
        retrieval_metrics(rankings, {"q3": set()})
    with pytest.raises(ValueError, match="k must be at least 1"):
        ndcg_at_k(RANKED, RELEVANT, 0)


class WordModel:
    """A stand-in encoder: a text's vector counts the letters a-e it holds (a query and a document alike)."""

    similarity_fn_name = "dot"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def _vectors(self, texts, kind):
        self.calls.append((kind, len(texts)))
        return np.array([[t.count(c) for c in "abcde"] for t in texts], dtype=np.float32)

    def encode_query(self, texts, **kwargs):
        return self._vectors(texts, "query")

    def encode_document(self, texts, **kwargs):
        return self._vectors(texts, "document")


def _collection() -> RetrievalCollection:
    corpus = {
        "d3": Document("d3", "", "bb"),
        "d1": Document("d1", "a", "a"),  # embedded as "a a"
        "d2": Document("d2", "", "bb"),  # the same vector as d3: ties rank by id
        "d4": Document("d4", "", "ccc"),
    }
    queries = {"q1": "a", "q2": "b", "q3": "c", "q4": "e"}
    qrels = {"q1": {"d1": 1}, "q2": {"d3": 1, "d4": 0}, "q3": {"d4": 1, "d2": 1}, "q4": {"d1": 0}}
    return RetrievalCollection("toy", "test", corpus, queries, qrels)


def test_dense_retriever_ranks_by_score_then_id():
    model, retriever = WordModel(), IndexRetriever()
    retriever.index(model, list(_collection().corpus.values()))
    (hits,) = retriever.search(model, ["b"], 3)
    assert [h.id for h in hits] == ["d2", "d3", "d1"] and [h.score for h in hits] == [2.0, 2.0, 0.0]
    assert isinstance(retriever, Retriever)
    with pytest.raises(RuntimeError, match="before index"):
        IndexRetriever().search(model, ["b"], 3)


def test_the_evaluator_reports_metrics_x100_timings_and_counts():
    model = WordModel()
    evaluator = RetrievalEvaluator(_collection(), at={"ndcg": (10,), "mrr": (10,), "recall": (1, 2)})
    out = evaluator(model)
    # q1 -> d1 first; q2 -> d2, d3 (d3 relevant, rank 2); q3 -> d4 first, d2 not in top 2; q4 has nothing relevant
    assert out["mrr@10"] == pytest.approx(100 * (1 + 0.5 + 1) / 3)
    assert out["recall@1"] == pytest.approx(100 * (1 + 0 + 0.5) / 3)
    assert out["recall@2"] == pytest.approx(100 * (1 + 1 + 0.5) / 3)
    assert (out["queries"], out["documents"]) == (3, 4)
    assert out["corpus_seconds"] >= 0 and 0 <= out["query_ms_p50"] <= out["query_ms_p99"]
    assert evaluator.primary_metric(model) == "ndcg@10" and evaluator.name == "toy"
    # the corpus is embedded once, the queries once together, then once each for the latency (plus a warm-up)
    assert model.calls == [("document", 4), ("query", 3)] + [("query", 1)] * 4


class FixedRetriever:
    """A retriever that returns given rankings: the evaluator must take them as they are."""

    def __init__(self, rankings: dict[str, list[str]]) -> None:
        self.rankings, self.indexed = rankings, []

    def index(self, model, documents, show_progress=None):
        self.indexed = [d.id for d in documents]

    def search(self, model, queries, k):
        return [[(doc, 0.0) for doc in self.rankings[q][:k]] for q in queries]


def test_any_retriever_plugs_in():
    retriever = FixedRetriever({"a": ["d4", "d1"], "b": ["d4", "d3"], "c": ["d2"]})
    out = RetrievalEvaluator(_collection(), retriever=retriever, latency_queries=0)(WordModel())
    assert retriever.indexed == ["d3", "d1", "d2", "d4"]
    assert out["mrr@10"] == pytest.approx(100 * (0.5 + 0.5 + 1) / 3) and "query_ms_p50" not in out


def test_an_evaluator_needs_a_relevant_document_and_the_headline_cutoff():
    collection = _collection()
    with pytest.raises(ValueError, match="must include ndcg@10"):
        RetrievalEvaluator(collection, at={"mrr": (10,)})
    collection.qrels = {"q4": {"d1": 0}}
    with pytest.raises(ValueError, match="toy: no query of split 'test' has a relevant document"):
        RetrievalEvaluator(collection)


def scifact_slice(queries: int = 20, others: int = 60) -> RetrievalCollection:
    """SciFact test: the first ``queries`` judged queries, their relevant documents and ``others`` more."""
    try:
        folder = data_dir() / "retrieval" / "scifact"
    except InputFileError as err:
        pytest.skip(str(err))
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    full = read_beir(folder)
    kept = dict(list(full.queries.items())[:queries])
    relevant = {d for q in kept for d in full.qrels[q]}
    rest = sorted(set(full.corpus) - relevant)
    chosen = relevant | set(random.Random(0).sample(rest, others))
    corpus = {d: doc for d, doc in full.corpus.items() if d in chosen}
    return RetrievalCollection("scifact-slice", "test", corpus, kept, {q: full.qrels[q] for q in kept})


def test_equals_sentence_transformers_information_retrieval_evaluator(model, reference):
    st_eval = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation")
    collection = scifact_slice()
    ours = RetrievalEvaluator(collection, latency_queries=0)(model)
    theirs = st_eval.InformationRetrievalEvaluator(
        queries=collection.queries,
        corpus=collection.document_texts(),
        relevant_docs={q: collection.relevant(q) for q in collection.queries},
        accuracy_at_k=[1, 3, 5, 10],
        precision_recall_at_k=[1, 3, 5, 10, 100],
        mrr_at_k=[10],
        ndcg_at_k=[10],
        map_at_k=[100],
        write_csv=False,
    )(reference)
    assert model.max_seq_length == reference.max_seq_length == 256
    theirs = {key.removeprefix("cosine_"): 100 * value for key, value in theirs.items()}
    compared = set(ours) - {"corpus_seconds", "queries", "documents"}
    assert len(compared) == 16 and compared <= set(theirs)
    for key in compared:
        assert ours[key] == pytest.approx(theirs[key], abs=0.01), key
    assert 40 < ours["ndcg@10"] < 99 and ours["recall@1"] < ours["recall@10"]  # a real, imperfect ranking


def test_cli_evaluates_a_beir_folder_and_writes_every_metric(model, tmp_path):
    folder = write_beir(tmp_path / "tiny")
    out = tmp_path / "scores.json"
    result = CliRunner().invoke(main, ["eval", "default", "--retrieval", str(folder), "--json", str(out)])
    assert result.exit_code == 0, result.output
    table = result.stdout.splitlines()
    assert table[0].split() == ["task", "score", "seconds", "metric"] and table[1].split()[::3] == ["tiny", "ndcg@10"]
    scores = json.loads(out.read_text())["tasks"]["tiny"]
    hybrid = RetrievalSettings(hybrid=True).retriever()  # as a default index (BM25 kept) is searched
    expected = RetrievalEvaluator(read_beir(folder), retriever=hybrid, latency_queries=0)(model)
    assert float(table[1].split()[1]) == pytest.approx(expected["ndcg@10"], abs=0.005)
    for key in ("ndcg@10", "mrr@10", "map@100", "recall@1", "recall@10", "recall@100"):
        assert scores[key] == pytest.approx(expected[key], abs=1e-6), key
    assert scores["queries"] == 2 and scores["query_ms_p99"] >= scores["query_ms_p50"] > 0


def test_cli_names_the_bad_line_of_a_beir_folder_before_loading_a_model(tmp_path):
    folder = write_beir(tmp_path / "c", qrels="q1\td1\t1\nq2\td7\t1\n")
    result = CliRunner().invoke(main, ["eval", "--model", str(tmp_path / "no-model"), "--retrieval", str(folder)])
    assert result.exit_code == 1 and "qrels/test.tsv: line 2: document 'd7'" in result.output
    result = CliRunner().invoke(main, ["eval", "--retrieval", str(folder), "--split", "dev"])
    assert result.exit_code == 1 and "splits with judgments here: test" in result.output


def test_cli_refuses_nothing_to_do_and_a_cross_encoder_for_retrieval(tmp_path):
    result = CliRunner().invoke(main, ["eval", "--tasks", ""])
    assert result.exit_code == 2 and "nothing to evaluate" in result.output
    folder = write_beir(tmp_path / "c")
    result = CliRunner().invoke(main, ["eval", "--cross-encoder", "--retrieval", str(folder)])
    assert result.exit_code == 2 and "retrieval needs an embedding model" in result.output


def test_retrieval_task_names_resolve_to_the_shared_folders(tmp_path):
    from sbert.evaluation.tasks import expand, headline, task_evaluator

    assert expand("retrieval,scifact") == ["scifact", "openoffice-dups"]
    assert headline("scifact", {"mrr@10": 1.0, "ndcg@10": 2.0}) == ("ndcg@10", 2.0)
    (tmp_path / "retrieval").mkdir()
    write_beir(tmp_path / "retrieval" / "scifact")
    evaluator = task_evaluator("scifact", tmp_path)
    assert (evaluator.name, len(evaluator.collection.corpus)) == ("scifact", 3)
