"""sbert.evaluation.triage / `sbert eval --triage`: the threshold for "is this already reported?" chosen on
judged duplicates against the hits a search shows first, checked by hand."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner
from test_beir import write_beir
from test_retrieval_eval import WordModel

from sbert.cli import main
from sbert.data.beir import Document, RetrievalCollection
from sbert.data.beir_labelled_pairs import drawn_queries
from sbert.evaluation.triage import TriageEvaluator, pair_cosines

# letters a-e counted (WordModel): "aa" = (2,0,...), "bb" = (0,2,...), "ab" = (1,1,...)
CORPUS = {"d1": Document("d1", "", "aa"), "d2": Document("d2", "", "bb"), "d3": Document("d3", "", "ab")}


class SearchModel(WordModel):
    """WordModel taking encode's options (the pairs are scored with them)."""

    def encode_query(self, texts, **options):
        return self._vectors(list(texts), "query")

    def encode_document(self, texts, **options):
        return self._vectors(list(texts), "document")


def test_each_query_meets_its_duplicate_and_the_best_ranked_other_document():
    # q "a": d1 (dot 2) then d3 (1): d3 is its hard non-duplicate, cosine 1/sqrt(2); likewise q "b" with d2
    collection = RetrievalCollection("toy", "test", CORPUS, {"q1": "a", "q2": "b"}, {"q1": {"d1": 1}, "q2": {"d2": 1}})
    metrics = TriageEvaluator(collection)(SearchModel())
    halfway = (1 + 1 / math.sqrt(2)) / 2  # the threshold lies between the two scores it separates
    assert metrics == pytest.approx(
        {
            "accuracy": 100.0,
            "accuracy_threshold": halfway,
            "f1": 100.0,
            "precision": 100.0,
            "recall": 100.0,
            "f1_threshold": halfway,
            "ap": 100.0,
            "pairs": 4,
            "duplicates": 2,
            # each query's top hit is its duplicate (ranked by dot product), leading by its cosine minus the
            # mean of the next hits' cosines: 1 - (1/sqrt(2) + 0) / 2
            "lead_f1": 100.0,
            "lead_precision": 100.0,
            "lead_recall": 100.0,
            "lead_threshold": 1 - 1 / (2 * math.sqrt(2)),
            "lead_ap": 100.0,
            "top_hit_right": 100.0,
        }
    )
    assert TriageEvaluator(collection).primary_metric(SearchModel()) == "f1"


def test_a_duplicate_below_a_non_duplicate_costs_precision_at_the_best_f1():
    # q "abb" judged a duplicate of d1 "aa" (cosine 2/(2 sqrt 5) = 0.447) while d2 "bb", ranked first (dot 4),
    # is not (cosine 0.894): the best F1 answers yes to both, and half the yes answers are wrong
    collection = RetrievalCollection("toy", "test", CORPUS, {"q": "abb"}, {"q": {"d1": 1}})
    metrics = TriageEvaluator(collection)(SearchModel())
    assert (metrics["pairs"], metrics["duplicates"]) == (2, 1)
    assert metrics["f1"] == pytest.approx(100 * 2 / 3) and metrics["precision"] == pytest.approx(50.0)
    assert metrics["recall"] == 100.0 and metrics["ap"] == pytest.approx(50.0)
    assert metrics["f1_threshold"] <= 2 / (2 * math.sqrt(5))


def test_the_lead_tells_which_top_hits_are_duplicates_where_cosines_cannot():
    # ranked by dot product (WordModel), led by cosines: q "aa" ranks d1 "aa" (cosine 1), d3 "ab" (0.707), then
    # three at 0: lead 1 - 0.707/4 = 0.823, its duplicate. q "abb" ranks d2 "bb" (cosine 4/(2 sqrt 5) = 0.894),
    # d3 (3/sqrt 10 = 0.949), d1 (0.447), then 0, 0: lead 0.894 - (0.949 + 0.447)/4 = 0.545, and d1 is its
    # duplicate, not d2. By cosine the pairs overlap (q "aa": its duplicate 1, its best other 0.707; q "abb": its
    # duplicate 0.447, its best other 0.894); the leads part them, halfway between 0.545 and 0.823.
    lead_a = 1 - 1 / math.sqrt(2) / 4
    lead_b = 4 / (2 * math.sqrt(5)) - (3 / math.sqrt(10) + 2 / (2 * math.sqrt(5))) / 4
    corpus = {**CORPUS, "d4": Document("d4", "", "cc"), "d5": Document("d5", "", "dd")}
    collection = RetrievalCollection(
        "toy", "test", corpus, {"qa": "aa", "qb": "abb"}, {"qa": {"d1": 1}, "qb": {"d1": 1}}
    )
    found = TriageEvaluator(collection).scores(SearchModel())
    by_query = dict(zip(drawn_queries(collection), zip(found.leads, found.top_hit_labels, strict=True), strict=True))
    assert by_query == {"qa": (pytest.approx(lead_a), 1), "qb": (pytest.approx(lead_b), 0)}
    metrics = TriageEvaluator(collection)(SearchModel())
    assert metrics["f1"] < 100 and metrics["top_hit_right"] == 50.0
    assert (metrics["lead_f1"], metrics["lead_precision"], metrics["lead_recall"], metrics["lead_ap"]) == (100,) * 4
    assert metrics["lead_threshold"] == pytest.approx((lead_a + lead_b) / 2)


def test_pair_cosines_score_queries_and_documents_as_a_search_does():
    calls = []

    class Spy(SearchModel):
        def _vectors(self, texts, kind):
            calls.append((kind, list(texts)))
            return super()._vectors(texts, kind)

    cosines = pair_cosines(Spy(), [("a", "aa"), ("a", "ab"), ("b", "ab")])
    assert cosines == pytest.approx([1.0, 1 / math.sqrt(2), 1 / math.sqrt(2)])
    assert calls == [("query", ["a", "b"]), ("document", ["aa", "ab"])]  # each distinct text once


@pytest.mark.slow
def test_sbert_eval_triage_prints_the_threshold_for_search(tmp_path):
    corpus = [
        {"_id": "d1", "title": "Printer crashes", "text": "Printing a page crashes Writer every time."},
        {"_id": "d2", "title": "Calc hangs", "text": "Calc hangs on large sheets with many formulas."},
        {"_id": "d3", "title": "Blurry fonts", "text": "The fonts in Impress slides render blurry."},
    ]
    queries = [
        {"_id": "q1", "text": "Writer crashes when I print a document"},
        {"_id": "q2", "text": "Large spreadsheets freeze Calc for minutes"},
        {"_id": "q3", "text": "Slide text looks blurry in Impress"},
    ]
    folder = write_beir(tmp_path / "tracker", corpus, queries, "q1\td1\t1\nq2\td2\t1\nq3\td3\t1\n", split="train")
    scores = tmp_path / "scores.json"
    args = ["eval", "--triage", str(folder), "--split", "train", "--json", str(scores), "--device", "cpu"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    metrics = json.loads(scores.read_text())["tasks"]["tracker:triage"]
    assert (metrics["pairs"], metrics["duplicates"], metrics["f1"]) == (6, 3, 100.0)
    threshold = f"{metrics['f1_threshold']:.4f}"
    assert (
        f"tracker:triage: a duplicate at cosine >= {threshold} (F1 100.0, precision 100.0, recall 100.0 on 6 pairs "
        f"of this split): sbert search INDEX QUERY --threshold {threshold}"
    ) in result.output
    lead = f"{metrics['lead_threshold']:.4f}"
    assert metrics["top_hit_right"] == 100.0 and metrics["lead_f1"] == 100.0
    assert (
        f"tracker:triage: the top hit is the duplicate when its cosine leads hits 2-10's mean by >= {lead} (F1 "
        "100.0, precision 100.0, recall 100.0; the top hit is a duplicate for 100.0% of the queries): sbert search "
        f"INDEX QUERY --lead {lead}"
    ) in result.output
    assert "stsb" not in result.output  # --triage alone runs no default task
