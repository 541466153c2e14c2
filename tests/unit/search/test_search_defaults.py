"""What a user who passes no option gets: an index that keeps BM25 (``sbert index build``'s default) is
searched hybrid, weighted, alpha 0.7, by ``search_vectors`` (the CLI, the service and eval alike); what an
index built with ``--auto`` recorded wins; a cosine ``threshold`` or ``lead`` keeps a search dense."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.cli import main
from sbert.search import fusion, retrieve
from sbert.search.base import Hybrid
from sbert.search.index.folder import VectorIndex
from sbert.search.retrieve import SearchOptions, search_vectors

pytest.importorskip("bm25s")

TEXTS = ["red apple pie", "green kitchen table", "blue ocean wave", "apple orchard in autumn"]


def _index(tmp_path, bm25: bool, **options) -> VectorIndex:
    vectors = np.eye(4, dtype=np.float32)
    return VectorIndex.build(tmp_path / f"ix{bm25}", vectors, model="default", texts=TEXTS, bm25=bm25, **options)


def test_the_default_weight_is_the_one_measured_on_both_collections():
    assert fusion.ALPHA == 0.7 and fusion.DEFAULT_FUSION == "weighted"
    assert SearchOptions().hybrid is None and SearchOptions().alpha is None  # settled by the index


def test_options_left_unset_are_settled_by_the_index(tmp_path):
    lexical, plain = _index(tmp_path, True), _index(tmp_path, False)
    settled = SearchOptions().for_index(lexical)
    assert (settled.hybrid, settled.fusion, settled.alpha) == (True, "weighted", 0.7)
    assert SearchOptions().for_index(plain).hybrid is False
    assert SearchOptions(threshold=0.5).for_index(lexical).hybrid is False  # a cosine threshold: dense
    assert SearchOptions(threshold=0.5, hybrid=True).for_index(lexical).hybrid is True
    chosen = SearchOptions(hybrid=False, alpha=0.2, fusion="rrf").for_index(lexical)
    assert (chosen.hybrid, chosen.fusion, chosen.alpha) == (False, "rrf", 0.2)


def test_an_index_built_with_auto_is_searched_as_it_recorded(tmp_path):
    recorded = {"hybrid": True, "fusion": "weighted", "alpha": 0.3, "auto": {"why": "test"}}
    index = _index(tmp_path, True, search=recorded)
    settled = SearchOptions().for_index(index)
    assert (settled.hybrid, settled.alpha) == (True, 0.3)
    assert SearchOptions(threshold=0.6).for_index(index).hybrid is False  # a cosine threshold: dense
    assert SearchOptions(alpha=0.9).for_index(index).alpha == 0.9  # what the user says wins


def test_the_default_search_is_the_weighted_fusion_by_hand(tmp_path):
    index = _index(tmp_path, True)
    query = np.array([[0.0, 0.6, 0.0, 0.8]], dtype=np.float32)  # dense: row 3 (0.8), then row 1 (0.6)
    default = search_vectors(index, query, ["apple"], SearchOptions(k=2))
    # BM25 finds rows 0 and 3 for "apple"; dense finds 3, 1, then 0 and 2 at 0. Min-max per side:
    # dense 3 -> 1, 1 -> 0.75, 0 and 2 -> 0; BM25 (equal scores for the two rows: both 1)
    fused = index.search(query, 2, hybrid=Hybrid(["apple"], "weighted", 0.7))
    assert [h.id for h in default[0]] == [h.id for h in fused[0]]
    assert [h.score for h in default[0]] == pytest.approx([h.score for h in fused[0]])
    assert default[0][0].id == index.ids[3] and default[0][0].score == pytest.approx(1.0)
    dense = search_vectors(index, query, ["apple"], SearchOptions(k=2, hybrid=False))
    assert [h.score for h in dense[0]] == pytest.approx([0.8, 0.6])


def test_index_build_keeps_bm25_unless_told_not_to(tmp_path):
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    runner = CliRunner()
    for flags, kept in (([], True), (["--no-bm25"], False)):
        out = tmp_path / f"index{kept}"
        result = runner.invoke(main, ["index", "build", str(corpus), "--out", str(out), *flags])
        assert result.exit_code == 0, result.output
        assert bool(json.loads((out / "manifest.json").read_text()).get("lexical")) is kept


def test_sbert_eval_retrieves_as_a_default_index_is_searched():
    from sbert.cli.training import _retrieval_settings

    unset = {
        "chunk": False, "mode": None, "window": None, "overlap": None, "hybrid": None, "fusion": None,
        "alpha": None, "lexical": False, "auto": False, "rerank": None, "candidates": None,
    }  # fmt: skip
    assert _retrieval_settings(32, **unset).hybrid is True
    assert _retrieval_settings(32, **{**unset, "hybrid": False}).hybrid is False
    assert _retrieval_settings(32, **{**unset, "lexical": True}).hybrid is False
    assert _retrieval_settings(32, **{**unset, "auto": True}).hybrid is False


def test_a_lead_keeps_only_a_top_hit_that_stands_out_over_hits_2_to_10(tmp_path):
    index = _index(tmp_path, True)  # keeps BM25: a lead, a cosine margin, still searches dense
    query = np.array([[0.0, 0.6, 0.0, 0.8]], dtype=np.float32)  # row 3 0.8, row 1 0.6, rows 0 and 2: 0
    lead = 0.8 - (0.6 + 0 + 0) / 3  # 0.6, over all the hits below the top one even with k=1
    assert SearchOptions(lead=0.5).for_index(index).hybrid is False
    kept = search_vectors(index, query, ["x"], SearchOptions(k=1, lead=lead - 1e-6))
    assert [[(h.row, round(h.score, 6)) for h in found] for found in kept] == [[(3, 0.8)]]
    assert kept[0][0].lead == pytest.approx(lead) and kept[0][0].as_json()["lead"] == pytest.approx(lead)
    assert search_vectors(index, query, ["x"], SearchOptions(k=3))[0][0].lead is None  # no lead asked: none
    assert search_vectors(index, query, ["x"], SearchOptions(k=3, lead=lead - 1e-6))[0][0].row == 3  # the top hit only
    assert search_vectors(index, query, ["x"], SearchOptions(k=3, lead=lead + 1e-6)) == [[]]
    both = SearchOptions(k=3, lead=0.1, threshold=0.9)  # it stands out, but under the threshold
    assert search_vectors(index, query, ["x"], both) == [[]]


def test_a_hit_as_json():
    from sbert.search.base import Hit

    assert Hit("a", 0.5, "text", 3).as_json() == {"id": "a", "score": 0.5, "text": "text", "row": 3}
    hit = Hit("a", 0.5, None, 3, (4, 9), "A title", math.inf)
    assert hit.as_json() == {
        "id": "a", "score": 0.5, "text": None, "row": 3, "span": [4, 9], "title": "A title", "lead": None
    }  # fmt: skip
    assert json.loads(json.dumps(hit.as_json()))["lead"] is None  # JSON has no infinity: the only hit's is null


def test_lead_by_hand():
    assert retrieve.lead([0.9, 0.5, 0.3]) == pytest.approx(0.9 - 0.4)
    assert retrieve.lead([1.0] + [0.5] * 9 + [-5.0, -5.0]) == pytest.approx(0.5)  # hits 11 and on do not count
    assert retrieve.lead([0.4]) == math.inf  # nothing to lead: an index of one text
    with pytest.raises(ValueError, match="at least one hit"):
        retrieve.lead([])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lead": math.nan}, "lead must be a finite number"),
        ({"lead": math.inf}, "lead must be a finite number"),
        ({"lead": 0.1, "rerank": object()}, "does not apply to re-ranked scores"),
    ],
)
def test_a_bad_lead_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        SearchOptions(**options)
