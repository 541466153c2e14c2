"""Hard-negative mining: each filter by hand on a tiny corpus with planted false negatives, the rows and
files it writes, and the command line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sbert.data.examples import RetrievalExample
from sbert.data.ntuples import read_ntuples
from sbert.search.negatives import NegativeFilters, choose_negatives, mine_hard_negatives, pairs_collection


def at(degrees: float) -> list[float]:
    """A unit vector at ``degrees`` from the query direction (1, 0): its cosine with the query is cos(degrees)."""
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


class AngleEncoder:
    """A TextEncoder whose vectors are given up front."""

    dim = 2

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts, *, batch_size=32, normalize=False, show_progress=None) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


# One query; its positive at 30 degrees (cosine 0.866). "near" is a planted false negative: an unjudged
# paraphrase of the positive that the model ranks above it (0.985); "copy" has the positive's very text
# under another id. Then true negatives at 40, 50, 60 and 120 degrees.
QUERIES = {"q": "how do cats purr"}
CORPUS = {
    "pos": "cats purr with their larynx",
    "near": "a cat purrs using its larynx",
    "copy": "cats purr with their larynx",
    "h40": "dogs bark",
    "h50": "birds sing",
    "h60": "fish swim",
    "far": "stock markets fell",
}
VECTORS = {
    "how do cats purr": at(0),
    "cats purr with their larynx": at(30),
    "a cat purrs using its larynx": at(10),
    "dogs bark": at(40),
    "birds sing": at(50),
    "fish swim": at(60),
    "stock markets fell": at(120),
}
QRELS = {"q": {"pos": 1}}


def mine(**settings):
    keep = settings.pop("keep_incomplete", False)
    return mine_hard_negatives(
        AngleEncoder(VECTORS), QUERIES, CORPUS, QRELS, NegativeFilters(**settings), keep_incomplete=keep
    )


def negatives(**settings) -> tuple[str, ...]:
    rows = mine(**settings).rows
    assert len(rows) == 1
    return rows[0].negative_ids


def test_without_filters_the_planted_false_negative_comes_first_and_the_copy_never():
    assert negatives(num_negatives=2) == ("near", "h40")
    assert negatives(num_negatives=5, range_max=6) == ("near", "h40", "h50", "h60", "far")


def test_rank_range_skips_the_top_ranks_and_caps_the_depth():
    assert negatives(num_negatives=2, range_min=1) == ("h40", "h50")
    assert negatives(num_negatives=2, range_min=2, range_max=4) == ("h50", "h60")
    # ranks count without the positive and its copy: rank 0 is "near", whatever the filters remove
    assert negatives(num_negatives=1, range_min=1, max_score=0.9) == ("h40",)


def test_absolute_margin_keeps_negatives_at_least_that_far_below_the_positive():
    # positive 0.866: keep score <= 0.716, so "near" (0.985) and h40 (0.766) go
    mined = mine(num_negatives=2, absolute_margin=0.15)
    assert mined.rows[0].negative_ids == ("h50", "h60")
    assert mined.skipped == {"absolute_margin": 2}


def test_relative_margin_is_a_ceiling_relative_to_the_positive():
    # keep score <= 0.866 * (1 - 0.05) = 0.823: only "near" goes
    assert negatives(num_negatives=2, relative_margin=0.05) == ("h40", "h50")
    # 0.2: keep score <= 0.693: h40 (0.766) goes too
    assert negatives(num_negatives=2, relative_margin=0.2) == ("h50", "h60")


def test_score_ceiling_and_floor():
    assert negatives(num_negatives=2, max_score=0.9) == ("h40", "h50")
    assert negatives(num_negatives=2, max_score=0.7, min_score=0.45) == ("h50", "h60")  # not far (-0.5)


def test_queries_left_short_are_dropped_unless_kept():
    mined = mine(num_negatives=3, min_score=0.6, max_score=0.9)  # only h40 and h50 pass
    assert (mined.rows, mined.short_queries, mined.dropped_rows) == ([], 1, 1)
    kept = mine(num_negatives=3, min_score=0.6, max_score=0.9, keep_incomplete=True)
    assert kept.rows[0].negative_ids == ("h40", "h50") and kept.short_queries == 1


def test_scores_are_the_cosines():
    row = mine(num_negatives=2, range_min=1).rows[0]
    assert row.positive_score == pytest.approx(math.cos(math.radians(30)), abs=1e-6)
    expected = [math.cos(math.radians(d)) for d in (40, 50)]
    assert list(row.negative_scores) == pytest.approx(expected, abs=1e-6)


def test_random_sampling_draws_from_what_passes_is_seeded_and_ordered_by_score():
    draws = {negatives(num_negatives=2, range_min=1, range_max=5, sampling="random", seed=s) for s in range(12)}
    assert all(set(d) <= {"h40", "h50", "h60", "far"} for d in draws)
    order = ["h40", "h50", "h60", "far"]
    assert all(order.index(a) < order.index(b) for a, b in draws)
    assert len(draws) > 1  # it does draw
    again = negatives(num_negatives=2, range_min=1, range_max=5, sampling="random", seed=3)
    assert again == negatives(num_negatives=2, range_min=1, range_max=5, sampling="random", seed=3)


def test_margins_use_the_lowest_scored_of_several_positives():
    qrels = {"q": {"pos": 1, "h40": 1}}  # positives at 0.866 and 0.766
    mined = mine_hard_negatives(
        AngleEncoder(VECTORS), QUERIES, CORPUS, qrels, NegativeFilters(num_negatives=2, absolute_margin=0.1)
    )
    # keep score <= 0.766 - 0.1 = 0.666: h50 (0.643) and h60; one row per positive, the same negatives
    assert [(r.positive_id, r.negative_ids) for r in mined.rows] == [("pos", ("h50", "h60")), ("h40", ("h50", "h60"))]


def test_choose_negatives_counts_what_each_filter_removed():
    skipped: dict[str, int] = {}
    filters = NegativeFilters(num_negatives=2, range_max=6, max_score=0.5, min_score=0.1)
    chosen = choose_negatives([5, 0, 1, 2, 3, 4], [0.9, 0.8, 0.4, 0.3, 0.05, -1.0], {5}, 0.95, filters, skipped)
    assert chosen == [1, 2]
    assert skipped == {"max_score": 1, "min_score": 2}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"num_negatives": 0}, "num_negatives must be at least 1"),
        ({"range_min": -1}, "range_min must be 0 or more"),
        ({"num_negatives": 3, "range_min": 2, "range_max": 4}, "hold fewer than num_negatives=3"),
        ({"sampling": "best"}, "sampling must be 'top' or 'random'"),
    ],
)
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        NegativeFilters(**settings)


def test_range_max_defaults_as_sentence_transformers_derives_it():
    assert NegativeFilters(num_negatives=3, range_min=2).range_end == 5
    assert NegativeFilters(num_negatives=3, range_min=2, relative_margin=0.05).range_end == 32


def test_unknown_ids_in_the_judgments_are_named():
    with pytest.raises(ValueError, match="document 'gone'"):
        mine_hard_negatives(AngleEncoder(VECTORS), QUERIES, CORPUS, {"q": {"gone": 1}})
    with pytest.raises(ValueError, match="query 'x' has no text"):
        mine_hard_negatives(AngleEncoder(VECTORS), QUERIES, CORPUS, {"x": {"pos": 1}})


def test_pairs_become_a_collection_with_shared_ids_for_equal_texts():
    queries, corpus, qrels = pairs_collection([("a", "x"), ("b", "y"), ("a", "z")], corpus=["w", "y"])
    assert queries == {"0": "a", "1": "b"}
    assert corpus == {"0": "w", "1": "y", "2": "x", "3": "z"}
    assert qrels == {"0": {"2": 1, "3": 1}, "1": {"1": 1}}


@pytest.mark.parametrize("triplets", [False, True])
def test_examples_and_files_round_trip(tmp_path, triplets):
    from sbert.data.ntuples import write_ntuples

    mined = mine(num_negatives=2, range_min=1)
    examples = mined.examples(triplets=triplets)
    q, p = QUERIES["q"], CORPUS["pos"]
    expected = (
        [RetrievalExample(q, p, ("dogs bark",)), RetrievalExample(q, p, ("birds sing",))]
        if triplets
        else [RetrievalExample(q, p, ("dogs bark", "birds sing"))]
    )
    assert examples == expected
    for name in ("mined.jsonl", "mined.tsv"):
        path = write_ntuples(tmp_path / name, examples, mined.extras(triplets) if name.endswith("jsonl") else None)
        assert list(read_ntuples(path)) == expected
    record = json.loads((tmp_path / "mined.jsonl").read_text().splitlines()[0])
    assert record["query_id"] == "q" and record["positive_id"] == "pos"
    assert record["negative_ids"] == (["h40"] if triplets else ["h40", "h50"])
    if triplets:  # a 3-column .tsv with the triplet header: the triplets format reads it too
        from sbert.data.triplets import read_triplets

        assert [t.negative for t in read_triplets(tmp_path / "mined.tsv")] == ["dogs bark", "birds sing"]


def test_queries_and_documents_are_embedded_as_the_model_searches_them():
    """A model with encode_query/encode_document (its prompts) mines with them, not with plain encode."""
    calls = []

    class Prompted(AngleEncoder):
        def encode_query(self, texts, **options):
            calls.append(("query", list(texts)))
            return self.encode(texts, **options)

        def encode_document(self, texts, **options):
            calls.append(("document", list(texts)))
            return self.encode(texts, **options)

    mined = mine_hard_negatives(Prompted(VECTORS), QUERIES, CORPUS, QRELS, NegativeFilters(num_negatives=1))
    assert calls == [("query", list(QUERIES.values())), ("document", list(CORPUS.values()))]
    assert mined.rows[0].negative_ids == negatives(num_negatives=1)
