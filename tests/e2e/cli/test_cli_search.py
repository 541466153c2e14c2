"""sbert index / search / mine / cluster, run in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.cli import main

TEXTS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Someone plays the guitar.",
    "A cat sleeps on the sofa.",
    "A kitten is sleeping on a couch.",
    "The stock market fell today.",
]


@pytest.fixture(scope="module")
def runner(model):
    return CliRunner()


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


def run(runner, *args):
    result = runner.invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_index_build_search_add_delete(runner, model, corpus, tmp_path):
    folder = tmp_path / "ix"
    run(runner, "index", "build", corpus, "--out", folder, "--ann")
    result = run(runner, "search", folder, "Someone is playing music on a guitar", "-k", "2", "--json", "--dense")
    hits = json.loads(result.stdout)[0]["hits"]
    assert {h["id"] for h in hits} == {"0", "2"}
    query = model.encode("Someone is playing music on a guitar", normalize=True)
    best = model.encode(TEXTS[int(hits[0]["id"])], normalize=True)
    assert hits[0]["score"] == pytest.approx(float(best @ query), abs=1e-5)
    # given no option, the index (BM25 kept by default) is searched hybrid, weighted, alpha 0.7
    default = run(runner, "search", folder, "Someone is playing music on a guitar", "-k", "3", "--json")
    fused = ["--hybrid", "--fusion", "weighted", "--alpha", "0.7"]
    same = run(runner, "search", folder, "Someone is playing music on a guitar", "-k", "3", "--json", *fused)
    assert json.loads(default.stdout) == json.loads(same.stdout) != json.loads(result.stdout)
    said = run(runner, "search", folder, "Someone is playing music on a guitar", "-k", "1").stderr
    assert "searched hybrid: dense + BM25, weighted, alpha 0.7" in said
    assert "searched dense" in run(runner, "search", folder, "guitar", "--dense").stderr
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"id": "news", "text": "Shares dropped sharply."}) + "\n", encoding="utf-8")
    run(runner, "index", "add", folder, more)
    text = run(runner, "search", folder, "stocks went down", "-k", "2").stdout
    assert "[news] Shares dropped sharply." in text and text.splitlines()[0] == "query: stocks went down"
    run(runner, "index", "delete", folder, "news")
    info = json.loads(run(runner, "index", "info", folder, "--json").stdout)
    assert (info["rows"], info["deleted"], info["default_method"]) == (6, 1, "hnsw")
    bad = runner.invoke(main, ["index", "delete", str(folder), "nope"])
    assert bad.exit_code == 1 and "nope" in bad.output


def test_search_refuses_another_model_and_missing_index(runner, corpus, tmp_path):
    folder = tmp_path / "ix"
    run(runner, "index", "build", corpus, "--out", folder)
    result = runner.invoke(main, ["search", str(folder), "q", "--model", str(tmp_path)])
    assert result.exit_code == 1 and "was built with model 'all-MiniLM-L6-v2'" in result.output
    result = runner.invoke(main, ["search", str(tmp_path / "none"), "q"])
    assert result.exit_code == 1 and "no such index folder" in result.output
    result = runner.invoke(main, ["search", str(folder), " "])  # the advice names what one can type
    assert result.exit_code == 1 and "texts[0] is empty" in result.output and "allow_empty" not in result.output
    result = runner.invoke(main, ["index", "build", str(corpus), "--out", str(folder)])
    assert result.exit_code != 0 and "overwrite" in result.output


def test_mine_prints_pairs_and_json(runner, corpus):
    text = run(runner, "mine", corpus, "--top-k", "1").stdout.splitlines()
    assert "[3] A cat sleeps on the sofa.  <->  [4] A kitten is sleeping on a couch." in text[0]
    pairs = json.loads(run(runner, "mine", corpus, "--threshold", "0.5", "--json").stdout)
    assert {(p["id_a"], p["id_b"]) for p in pairs} == {("3", "4"), ("0", "2")}
    assert all(p["score"] >= 0.5 for p in pairs)


@pytest.mark.parametrize(
    "args",
    [
        ["--method", "community", "--min-size", "2", "--threshold", "0.6"],
        ["--method", "agglomerative", "--threshold", "0.6"],
        ["--method", "kmeans", "--k", "4"],
    ],
)
def test_cluster_methods(runner, corpus, args):
    out = json.loads(run(runner, "cluster", corpus, *args, "--json").stdout)
    groups = [sorted(int(m["id"]) for m in c) for c in out["clusters"]]
    assert [0, 2] in groups and [3, 4] in groups


def test_cluster_kmeans_needs_k_and_bad_corpus_is_named(runner, corpus, tmp_path):
    result = runner.invoke(main, ["cluster", str(corpus), "--method", "kmeans"])
    assert result.exit_code == 2 and "--k" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"txt": "oops"}\n', encoding="utf-8")
    result = runner.invoke(main, ["mine", str(bad)])
    assert result.exit_code == 1 and "bad.jsonl: line 2" in result.output


def test_index_embeddings_equal_library(corpus, tmp_path, model, runner):
    from sbert.search.index.folder import VectorIndex

    run(runner, "index", "build", corpus, "--out", tmp_path / "ix")
    stored = np.asarray(VectorIndex.open(tmp_path / "ix").vectors)
    np.testing.assert_allclose(stored, model.encode(TEXTS, normalize=True), atol=1e-6)


def test_index_records_its_backend_and_refuses_another_precision(runner, corpus, tmp_path):
    folder = tmp_path / "ix"
    run(runner, "index", "build", corpus, "--out", folder)
    info = json.loads(run(runner, "index", "info", folder, "--json").stdout)
    assert info["backend"] == "torch/fp32"
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "backend": "onnx/int8"}))  # as if built so
    refused = runner.invoke(main, ["search", str(folder), "a guitar"])
    assert refused.exit_code == 1 and "made with onnx/int8; these are made with torch/fp32" in refused.output
    assert "--allow-mixed-backend" in refused.output
    hits = json.loads(run(runner, "search", folder, "a guitar", "--allow-mixed-backend", "--json").stdout)
    assert hits[0]["hits"][0]["id"] in {"0", "2"}
    more = tmp_path / "more.txt"
    more.write_text("Shares dropped sharply.\n", encoding="utf-8")
    refused = runner.invoke(main, ["index", "add", str(folder), str(more)])
    assert refused.exit_code == 1 and "--allow-mixed-backend" in refused.output
    run(runner, "index", "add", folder, more, "--allow-mixed-backend")
    assert json.loads(run(runner, "index", "info", folder, "--json").stdout)["backend"] == "mixed"


def test_index_add_takes_the_model_and_checks_it(runner, corpus, tmp_path):
    folder = tmp_path / "ix"
    run(runner, "index", "build", corpus, "--out", folder)
    more = tmp_path / "more.txt"
    more.write_text("Shares dropped sharply.\n", encoding="utf-8")
    refused = runner.invoke(main, ["index", "add", str(folder), str(more), "--model", str(tmp_path)])
    assert refused.exit_code == 1 and "was built with model 'all-MiniLM-L6-v2'" in refused.output
    run(runner, "index", "add", folder, more, "--model", "default", "--lock-timeout", "5")
    assert json.loads(run(runner, "index", "info", folder, "--json").stdout)["rows"] == 7


def test_cluster_prints_at_most_limit_clusters_and_texts(runner, corpus):
    groups = json.loads(run(runner, "cluster", corpus, "--method", "kmeans", "--k", "3", "--json").stdout)["clusters"]
    largest = len(groups[0])
    assert largest >= 2
    out = run(runner, "cluster", corpus, "--method", "kmeans", "--k", "3", "--limit", "1")
    lines = out.stdout.splitlines()
    assert lines[0] == f"cluster 0 ({largest} texts)" and len(lines) == 3
    assert lines[2] == f"    ... {largest - 1} more"
    assert "3 clusters; 0 texts in none (2 more not shown: --limit 0 shows all" in out.stderr
    everything = run(runner, "cluster", corpus, "--method", "kmeans", "--k", "3", "--limit", "0").stdout
    assert len(everything.splitlines()) == 3 + 6


def test_search_threshold_answers_is_this_already_here(runner, model, corpus, tmp_path):
    """--threshold keeps the hits scoring at least T, and says so when none does."""
    folder = tmp_path / "ix"
    run(runner, "index", "build", corpus, "--out", folder)
    everything = json.loads(run(runner, "search", folder, "A man plays guitar", "-k", "6", "--json").stdout)[0]["hits"]
    everything.sort(key=lambda h: -h["cosine"])  # searched hybrid (fused order); the threshold is on cosines
    cut = (everything[0]["cosine"] + everything[1]["cosine"]) / 2  # between the best hit and the next
    kept = json.loads(
        run(runner, "search", folder, "A man plays guitar", "-k", "6", "--threshold", cut, "--json").stdout
    )
    assert [h["id"] for h in kept[0]["hits"]] == [everything[0]["id"]]
    text = run(runner, "search", folder, "A man plays guitar", "--threshold", "0.999").stdout
    assert "no hit has a cosine of 0.999 or more" in text and "--threshold" in text


def test_search_lead_answers_is_the_top_hit_the_duplicate(runner, model, corpus, tmp_path):
    """--lead keeps the top hit alone where its cosine leads the mean of hits 2-10 by at least L."""
    folder = tmp_path / "ix"
    run(runner, "index", "build", corpus, "--out", folder, "--no-bm25")
    query = "A man plays guitar"
    scores = [
        h["score"] for h in json.loads(run(runner, "search", folder, query, "-k", "10", "--json").stdout)[0]["hits"]
    ]
    lead = scores[0] - sum(scores[1:]) / len(scores[1:])  # hits 2-10 (all there are, where fewer)
    top = json.loads(run(runner, "search", folder, query, "-k", "1", "--json").stdout)[0]["hits"]
    kept = json.loads(run(runner, "search", folder, query, "-k", "5", "--lead", lead - 1e-4, "--json").stdout)
    assert [{k: v for k, v in h.items() if k != "lead"} for h in kept[0]["hits"]] == top
    assert kept[0]["hits"][0]["lead"] == pytest.approx(lead, abs=1e-5)
    text = run(runner, "search", folder, query, "--lead", lead - 1e-4).stdout
    assert f"(leads hits 2-10 by {lead:.4f})" in text and text.count("\n   1. ") == 1
    text = run(runner, "search", folder, query, "--lead", lead + 1e-4).stdout
    assert "no hit stands out" in text and "lower --lead" in text and "scores under" not in text
    text = run(runner, "search", folder, query, "--lead", lead - 1e-4, "--threshold", 0.999).stdout
    assert f"leads hits 2-10 by less than {lead - 1e-4:g}, or scores under 0.999" in text  # stands out, but under it
