"""A k (or candidates) far beyond an index's size returns all it holds, at once: nothing a request or an option
sizes is allocated wider than the index (a k of 2**40 would need 8 TiB per query row)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_index import cli_index
from click.testing import CliRunner

from sbert.search.exact import TopK
from sbert.search.fusion import fuse
from sbert.search.index.folder import VectorIndex
from sbert.search.index.memory import MemoryIndex
from sbert.search.index.query import Documents
from sbert.search.lexical import BM25
from sbert.search.retrieve import SearchOptions, search_vectors

pytest.importorskip("bm25s")

HUGE = 2**40
TEXTS = ["the cat sat on the mat", "dogs bark at cats", "a bird sings"]
VECTORS = np.eye(3, 4, dtype=np.float32) + 0.1
Q = np.array([[1, 0.2, 0, 0]], dtype=np.float32)


@pytest.mark.parametrize("where", ["memory", "folder"])
@pytest.mark.parametrize(
    "options",
    [
        {"hybrid": False},
        {"hybrid": True},
        {"hybrid": True, "candidates": HUGE},
        {"hybrid": True, "fusion": "rrf"},
        {"hybrid": False, "lead": 0.0},
        {"hybrid": False, "threshold": -1.0},
    ],
)
def test_a_huge_k_returns_every_row_of_a_tiny_index(tmp_path, where, options):
    common = {"model": "default", "texts": TEXTS, "bm25": True}
    if where == "memory":
        index = MemoryIndex.build(VECTORS, **common)
    else:
        index = VectorIndex.build(tmp_path / "ix", VECTORS, **common)
    found = search_vectors(index, Q, ["cat"], SearchOptions(k=HUGE, **options))[0]  # no (n, k) array made
    assert [h.id for h in found][:1] == ["0"] and len(found) == (1 if "lead" in options else 3)


@pytest.mark.parametrize("mode", ["maxp", "mean"])
def test_a_huge_k_returns_every_document_of_a_tiny_index_of_documents(tmp_path, mode):
    documents = Documents(["A", "A", "B"], np.array([[0, 6], [7, 12], [0, 5]]), window=4, overlap=0)
    index = VectorIndex.build(tmp_path / "ix", VECTORS, model="default", texts=TEXTS, documents=documents, bm25=True)
    for hybrid in (False, True):
        found = search_vectors(index, Q, ["cat"], SearchOptions(k=HUGE, mode=mode, hybrid=hybrid, candidates=HUGE))
        assert sorted(h.id for h in found[0]) == ["A", "B"]
    rows = index.search_rows(Q, HUGE)
    assert rows.indices.shape == (1, 3) and sorted(rows.indices[0].tolist()) == [0, 1, 2]


def test_bm25_and_fusion_cut_k_to_what_they_hold():
    bm25 = BM25.build(TEXTS)
    found = bm25.search(["cat cats"], HUGE)
    assert found.indices.shape == (1, 3) and sorted(found.indices[0][:2].tolist()) == [0, 1]
    dense = TopK(np.array([[0.9, 0.5]], dtype=np.float32), np.array([[0, 2]]))
    fused = fuse(dense, found, HUGE)
    assert fused.indices.shape[1] <= 5 and sorted(r for r in fused.indices[0].tolist() if r >= 0) == [0, 1, 2]


def test_sbert_search_with_a_huge_top_k_answers_at_once(tiny_encoder, tmp_path):
    from sbert.cli import main

    index = cli_index(tiny_encoder, TEXTS, tmp_path)
    runner = CliRunner()
    for extra in ([], ["--dense"], ["--candidates", str(HUGE)]):
        result = runner.invoke(main, ["search", str(index), "cat", "--top-k", str(HUGE), "--json", *extra])
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.stdout)[0]["hits"]) == 3
