"""Pair classification (is this a duplicate?): thresholds, F1 and AP by hand and against
sentence-transformers' BinaryClassificationEvaluator; duplicate pairs drawn from a BEIR collection."""

from __future__ import annotations

import numpy as np
import pytest

from sbert.data.beir import Document, RetrievalCollection
from sbert.data.beir_labelled_pairs import classification_pairs
from sbert.evaluation.pair_classification import (
    PairClassificationEvaluator,
    average_precision,
    best_accuracy,
    best_f1,
    classification_metrics,
)

SCORES = [0.9, 0.8, 0.7, 0.6, 0.4, 0.2]
LABELS = [1, 1, 0, 1, 0, 0]


def test_thresholds_and_f1_by_hand():
    # yes at or above 0.75 (between 0.8 and 0.7): only 0.6 answered wrong, 5 of 6 right; 0.5 is as good
    # (only 0.7 wrong) but comes later: the first best threshold is kept, as sentence-transformers keeps it
    assert best_accuracy(SCORES, LABELS) == pytest.approx((5 / 6, 0.75))
    f1, precision, recall, threshold = best_f1(SCORES, LABELS)
    # cut after 0.8: p 1, r 2/3, F1 0.8; after 0.6: p 3/4, r 1, F1 6/7 (best)
    assert (f1, precision, recall, threshold) == pytest.approx((6 / 7, 0.75, 1.0, 0.5))
    # distances: small is similar; the same answers
    distances = [1 - s for s in SCORES]
    assert best_accuracy(distances, LABELS, higher_is_similar=False) == pytest.approx((5 / 6, 0.25))
    assert best_accuracy([0.3, 0.1], [0, 0])[0] == 1.0  # no duplicates: answer no to everything
    ap = (1 + 1 + 3 / 4) / 3  # precision at each duplicate
    assert classification_metrics(SCORES, LABELS)["ap"] == pytest.approx(ap)


def test_average_precision_by_hand_takes_the_order_alone():
    # ranked 0.9 (yes), 0.8 (yes), 0.7 (no), 0.6 (yes): (1 + 1 + 3/4) / 3
    assert average_precision(SCORES, LABELS) == pytest.approx(11 / 12)
    assert average_precision([np.inf, *SCORES[1:]], LABELS) == pytest.approx(11 / 12)  # an infinite score ranks
    assert average_precision([1 - s for s in SCORES], LABELS, higher_is_similar=False) == pytest.approx(11 / 12)
    assert average_precision([0.2, 0.2, 0.1], [1, 0, 1]) == pytest.approx((1 / 2 + 2 / 3) / 2)  # a tie counts as one
    assert average_precision(SCORES, [0] * 6) == 0.0  # no duplicate to find, as best_f1


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="expected as many labels as scores"):
        best_f1([0.1, 0.2], [1])
    with pytest.raises(ValueError, match=r"labels must be 1 \(duplicate\) or 0"):
        best_accuracy([0.1, 0.2], [1, 2])
    with pytest.raises(ValueError, match="similarity 'jaccard': expected one of cosine, dot, euclidean, manhattan"):
        PairClassificationEvaluator([("a", "b")], [1], similarities=["jaccard"])


class Vectors:
    """A model whose vectors are given up front."""

    similarity_fn_name = "cosine"

    def __init__(self, vectors):
        self.vectors = vectors

    def encode(self, texts, batch_size=32, show_progress=None):
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


VECTORS = {"a": [1, 0], "a'": [0.9, 0.1], "b": [0, 1], "b'": [0.2, 1], "c": [1, 1], "d": [-1, 0.2]}
PAIRS = [("a", "a'"), ("b", "b'"), ("a", "b"), ("c", "d"), ("a", "c")]
PAIR_LABELS = [1, 1, 0, 0, 1]


def test_the_evaluator_scores_every_similarity():
    model = Vectors(VECTORS)
    evaluator = PairClassificationEvaluator(PAIRS, PAIR_LABELS)
    metrics = evaluator(model)
    assert evaluator.primary_metric(model) == "cosine_ap"
    assert {k.split("_", 1)[0] for k in metrics} == {"cosine", "dot", "euclidean", "manhattan"}
    assert metrics["cosine_accuracy"] == 1.0 and metrics["cosine_f1"] == 1.0 and metrics["cosine_ap"] == 1.0


@pytest.mark.slow
def test_metrics_equal_sentence_transformers(model):
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.evaluation import BinaryClassificationEvaluator

    texts = [
        "the editor crashes on save",
        "a crash when saving",
        "tables lose borders",
        "borders vanish from tables",
        "cannot open docx",
        "printing is slow",
        "slow printing of pages",
        "docx does not open",
    ]
    pairs = [(texts[i], texts[j]) for i in range(8) for j in range(i + 1, 8)][:20]
    labels = [int(i % 3 == 0) for i in range(len(pairs))]
    ours = PairClassificationEvaluator(pairs, labels)(model)
    reference = st.SentenceTransformer(str(model.path), device="cpu")
    theirs = BinaryClassificationEvaluator(
        [p[0] for p in pairs],
        [p[1] for p in pairs],
        labels,
        similarity_fn_names=["cosine", "dot", "euclidean", "manhattan"],
    ).compute_metrics(reference)
    for fn in ("cosine", "dot", "euclidean", "manhattan"):
        for key in ("accuracy", "accuracy_threshold", "f1", "precision", "recall", "f1_threshold", "ap"):
            assert ours[f"{fn}_{key}"] == pytest.approx(float(theirs[fn][key]), abs=1e-4), f"{fn}_{key}"


def collection() -> RetrievalCollection:
    corpus = {f"d{i}": Document(f"d{i}", "", f"report {i}") for i in range(6)}
    queries = {"q1": "crash on save", "q2": "tables", "q3": "no judgments"}
    qrels = {"q1": {"d0": 1, "d1": 1}, "q2": {"d2": 1, "d3": 0}, "q3": {"d4": 0}}
    return RetrievalCollection("toy", "test", corpus, queries, qrels)


def test_pairs_from_a_collection_are_judged_positives_and_hard_negatives():
    ranks = {"crash on save": ["d5", "d0", "d4", "d1"], "tables": ["d2", "d3", "d0"]}
    pairs, labels = classification_pairs(collection(), seed=1, ranker=lambda qs: [ranks[q] for q in qs])
    got = sorted(zip(pairs, labels, strict=True))
    assert got == sorted(
        [
            (("crash on save", "report 0"), 1),
            (("crash on save", "report 1"), 1),
            (("crash on save", "report 5"), 0),
            (("tables", "report 2"), 1),
            (("tables", "report 3"), 0),  # judged not relevant: a hard non-duplicate
        ]
    )
    first = classification_pairs(collection(), seed=3, negatives_per_query=2)
    assert first == classification_pairs(collection(), seed=3, negatives_per_query=2)  # the seed fixes the draw
    assert sum(first[1]) == 3 and len(first[1]) == 7
    assert all(
        doc not in ("report 0", "report 1")
        for (q, doc), y in zip(*first, strict=True)
        if q == "crash on save" and y == 0
    )


def test_pairs_from_openoffice_duplicates():
    from sbert.data.beir import read_beir
    from sbert.data.paths import data_dir
    from sbert.errors import InputFileError

    try:
        folder = data_dir() / "retrieval" / "openoffice-dups"
    except InputFileError as err:
        pytest.skip(str(err))
    pairs, labels = classification_pairs(read_beir(folder, "test"), seed=0, max_queries=50)
    assert sum(labels) >= 50 and labels.count(0) == 50
    assert (pairs, labels) == classification_pairs(read_beir(folder, "test"), seed=0, max_queries=50)
