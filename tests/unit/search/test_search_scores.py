"""Scores a person can read: every hit carries its cosine beside the score that ranked it (fused, re-ranked),
and --threshold and --lead compare cosines whatever ranked the hits (a weighted fusion's best is 1 for any query)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from cli_index import cli_index
from click.testing import CliRunner

from sbert.search.base import Hit
from sbert.search.index.folder import VectorIndex
from sbert.search.index.memory import MemoryIndex
from sbert.search.index.query import Documents
from sbert.search.retrieve import SearchOptions, hit_lead, search_vectors

pytest.importorskip("bm25s")

# The query is far from every text (cosines 0.20 down to 0.05); only the first shares a word with it, so BM25
# finds it alone and the weighted fusion scores it 0.7 x 1 + 0.3 x 1 = 1.0: "standing out" by any fused margin.
TEXTS = ["norwegian spell checker crashes", "printer prints blank pages", "calc hangs on save", "fonts look blurry"]
COSINES = [0.20, 0.15, 0.10, 0.05]
QUERY = "norwegian spell checker"


def _unit(cosine: float, axis: int) -> list[float]:
    """A unit vector at ``cosine`` to (1, 0, 0, 0, 0), the rest along ``axis``."""
    out = [0.0] * 5
    out[0], out[axis] = cosine, math.sqrt(1 - cosine**2)
    return out


VECTORS = np.array([_unit(c, n + 1) for n, c in enumerate(COSINES)], dtype=np.float32)
Q = np.array([[1, 0, 0, 0, 0]], dtype=np.float32)


def _index(tmp_path=None, metric="cosine", vectors=VECTORS):
    common = {"model": "default", "texts": TEXTS, "bm25": True, "metric": metric}
    if tmp_path is None:
        return MemoryIndex.build(vectors, **common)
    return VectorIndex.build(tmp_path / "ix", vectors, **common)


@pytest.mark.parametrize("where", ["memory", "folder"])
def test_a_fused_hit_carries_its_cosine_beside_the_fused_score(tmp_path, where):
    index = _index(None if where == "memory" else tmp_path)
    fused = search_vectors(index, Q, [QUERY], SearchOptions(k=4, hybrid=True))[0]
    assert fused[0].id == "0" and fused[0].score == pytest.approx(1.0)  # relative to the query's own candidates
    assert [h.cosine for h in fused] == pytest.approx([COSINES[int(h.id)] for h in fused], abs=1e-6)
    assert fused[0].as_json()["cosine"] == pytest.approx(0.20, abs=1e-6)
    dense = search_vectors(index, Q, [QUERY], SearchOptions(k=4, hybrid=False))[0]
    assert [h.cosine for h in dense] == [h.score for h in dense]  # a dense search's score is the cosine itself


def test_a_lead_and_a_threshold_compare_cosines_not_fused_scores():
    index = _index()
    fused = search_vectors(index, Q, [QUERY], SearchOptions(k=10, hybrid=True))[0]
    assert fused[0].score - np.mean([h.score for h in fused[1:]]) > 0.5  # the fused margin: it "stands out"
    assert hit_lead(fused) == pytest.approx(0.20 - (0.15 + 0.10 + 0.05) / 3, abs=1e-6)  # by cosine it does not
    assert search_vectors(index, Q, [QUERY], SearchOptions(hybrid=True, lead=0.11)) == [[]]
    assert search_vectors(index, Q, [QUERY], SearchOptions(hybrid=True, threshold=0.5)) == [[]]
    kept = search_vectors(index, Q, [QUERY], SearchOptions(hybrid=True, lead=0.09))[0]
    assert [h.id for h in kept] == ["0"] and kept[0].lead == pytest.approx(0.10, abs=1e-6)
    kept = search_vectors(index, Q, [QUERY], SearchOptions(k=4, hybrid=True, threshold=0.12))[0]
    assert sorted(h.id for h in kept) == ["0", "1"]


def test_a_dot_index_gives_the_cosine_not_the_dot_product():
    index = _index(metric="dot", vectors=VECTORS * np.array([[1], [2], [3], [4]], dtype=np.float32))
    found = search_vectors(index, 2 * Q, [QUERY], SearchOptions(k=4, hybrid=False))[0]
    assert {h.id: h.score for h in found} == pytest.approx({"0": 0.4, "1": 0.6, "2": 0.6, "3": 0.4}, abs=1e-5)
    assert {h.id: h.cosine for h in found} == pytest.approx(dict(zip("0123", COSINES, strict=True)), abs=1e-6)


def test_a_document_hit_carries_its_best_window_cosine_or_its_mean_vectors():
    windows = np.array([_unit(0.9, 1), _unit(0.1, 2), _unit(0.5, 3)], dtype=np.float32)
    documents = Documents(["A", "A", "B"], np.array([[0, 4], [4, 8], [0, 4]]), window=4, overlap=0)
    index = MemoryIndex.build(windows, model="default", texts=["abcd", "efgh", "ijkl"], documents=documents)
    maxp = {h.id: h.cosine for h in search_vectors(index, Q, ["x"], SearchOptions(k=2))[0]}
    assert maxp == pytest.approx({"A": 0.9, "B": 0.5}, abs=1e-6)
    mean = search_vectors(index, Q, ["x"], SearchOptions(k=2, mode="mean"))[0]
    a = windows[:2].mean(axis=0)
    assert {h.id: h.cosine for h in mean} == pytest.approx({"A": a[0] / np.linalg.norm(a), "B": 0.5}, abs=1e-6)
    assert [h.cosine for h in mean] == [h.score for h in mean]


def test_the_json_shape_names_the_cosine_where_known():
    assert Hit("a", 0.9, "t", 1).as_json() == {"id": "a", "score": 0.9, "text": "t", "row": 1}
    with_cosine = {"id": "a", "score": 0.9, "cosine": 0.4, "text": "t", "row": 1}
    assert Hit("a", 0.9, "t", 1, cosine=0.4).as_json() == with_cosine


def test_sbert_search_prints_the_fused_score_and_the_cosine_each_named(tiny_encoder, tmp_path):
    from sbert.cli import main

    cli_index(tiny_encoder, TEXTS, tmp_path)
    runner = CliRunner()
    fused = runner.invoke(main, ["search", str(tmp_path / "ix"), QUERY, "-k", "2"])
    assert fused.exit_code == 0, fused.output
    first = fused.stdout.splitlines()[1]
    assert first.startswith("   1. fused 1.0000  cosine ") and first.endswith("norwegian spell checker crashes")
    assert "'fused' ranks this query's hits" in fused.stderr and "'cosine' is the embedding similarity" in fused.stderr
    dense = runner.invoke(main, ["search", str(tmp_path / "ix"), QUERY, "-k", "2", "--dense"])
    assert dense.stdout.splitlines()[1].startswith("   1. cosine ") and "fused" not in dense.stdout
    hits = json.loads(runner.invoke(main, ["search", str(tmp_path / "ix"), QUERY, "--json"]).stdout)[0]["hits"]
    assert all(-1 <= h["cosine"] <= 1 for h in hits) and hits[0]["score"] == pytest.approx(1.0)
