"""sbert index build --chunk/--bm25 and sbert search --hybrid/--mode, run in-process with the default model."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sbert.cli import main

pytest.importorskip("bm25s")

DOCUMENTS = [
    {
        "id": "bread",
        "text": "Mix flour, water, salt and yeast. Knead the dough for ten minutes. Let it rise for an hour. "
        "Shape the loaf and bake it in a hot oven until the crust is brown.",
    },
    {
        "id": "football",
        "text": "The match ended in a draw. Both teams scored twice in the second half. "
        "The goalkeeper saved a penalty in the last minute.",
    },
    {"id": "weather", "text": "Tomorrow will be sunny with a light breeze."},
]


def run(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def folder(model, tmp_path):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS), encoding="utf-8")
    out = tmp_path / "ix"
    run("index", "build", corpus, "--out", out, "--chunk", "--window", "16", "--overlap", "4", "--bm25")
    return out


def test_search_returns_documents_with_their_best_passage(folder):
    found = json.loads(run("search", folder, "how long should the dough rise", "-k", "3", "--json"))[0]["hits"]
    assert found[0]["id"] == "bread" and len({h["id"] for h in found}) == 3
    best = found[0]
    text = DOCUMENTS[0]["text"]
    assert text[best["span"][0] : best["span"][1]] == best["text"] and "rise" in best["text"]
    assert len(best["text"]) < len(text)  # a passage, not the whole document
    human = run("search", folder, "penalty save", "-k", "1")
    assert "[football] (chars " in human and "penalty" in human
    info = json.loads(run("index", "info", folder, "--json"))
    recorded = {"window": 16, "overlap": 4, "mode": "maxp", "prompt": "", "max_windows": 32}  # the default bound
    assert info["documents"] == {**recorded, "count": 3}
    assert info["bm25"] is True


def test_hybrid_and_mean_searches(folder):
    for extra in (["--hybrid"], ["--hybrid", "--fusion", "rrf"], ["--hybrid", "--alpha", "0.3"], ["--mode", "mean"]):
        found = json.loads(run("search", folder, "goalkeeper penalty", "-k", "2", "--json", *extra))[0]["hits"]
        assert found[0]["id"] == "football" and found[0]["span"] is not None


def test_add_splits_new_documents_as_the_index_did_and_delete_takes_documents(folder, tmp_path):
    more = tmp_path / "more.txt"
    more.write_text("Cats sleep most of the day. " * 8 + "\n", encoding="utf-8")
    run("index", "add", folder, more)
    info = json.loads(run("index", "info", folder, "--json"))
    assert info["documents"]["count"] == 4
    found = json.loads(run("search", folder, "sleeping cats", "-k", "1", "--json"))[0]["hits"]
    assert found[0]["id"] == "0"  # numbered: the corpus had no ids
    run("index", "delete", folder, "bread")
    assert json.loads(run("index", "info", folder, "--json"))["documents"]["count"] == 3
    result = CliRunner().invoke(main, ["search", str(folder), "bread", "--hybrid", "--mode", "best"])
    assert result.exit_code == 2 and "best" in result.output
