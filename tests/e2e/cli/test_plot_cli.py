"""sbert plot map / heatmap / training / retrieval, run in-process: files written, data from the input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib", reason="sbert plot needs the plot extra: pip install 'sbert[plot]'")
pytest.importorskip("plotly", reason="sbert plot needs the plot extra: pip install 'sbert[plot]'")

from plot_helpers import html_traces

from sbert.cli import main

TEXTS = [
    "A man is playing a guitar.",
    "Someone plays the guitar.",
    "A man plays an acoustic guitar on stage.",
    "A cat sleeps on the sofa.",
    "A kitten is sleeping on a couch.",
    "The cat naps in the sun.",
]


def run(*args, ok: bool = True):
    result = CliRunner().invoke(main, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def embeddings_file(tmp_path):
    """12 embeddings in two groups, as `sbert encode --out x.npy` writes them, with their texts and labels."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(6, 8)) + 4 * np.eye(8)[i] for i in range(2)]).astype(np.float32)
    np.save(tmp_path / "e.npy", x)
    (tmp_path / "e.npy.meta.json").write_text(json.dumps({"model": "my-model"}))
    (tmp_path / "texts.txt").write_text("".join(f"text {i}\n" for i in range(12)))
    (tmp_path / "labels.txt").write_text("".join(f"{'ab'[i // 6]}\n" for i in range(12)))
    return tmp_path / "e.npy"


def test_map_of_embeddings_with_labels_and_hover_texts(embeddings_file, tmp_path):
    out = tmp_path / "map.html"
    folder = embeddings_file.parent
    result = run("plot", "map", embeddings_file, "--texts", folder / "texts.txt", "--labels", folder / "labels.txt",
                 "--method", "pca", "--out", out)  # fmt: skip
    assert "wrote a pca map of 12 points" in result.output
    traces, layout = html_traces(out)
    assert {t["name"]: sorted(t["hovertext"]) for t in traces} == {
        "a": sorted(f"text {i}<br><i>a</i>" for i in range(6)),
        "b": sorted(f"text {i}<br><i>b</i>" for i in range(6, 12)),
    }
    assert "PCA map of 12 texts (my-model)" in layout["title"]["text"]
    png = tmp_path / "map.png"
    run("plot", "map", embeddings_file, "--method", "pca", "--max-points", "5", "--out", png)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_map_refuses_labels_of_another_length_and_an_unknown_format(embeddings_file, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("a\nb\n")
    result = run(
        "plot", "map", embeddings_file, "--labels", short, "--method", "pca", "-o", tmp_path / "m.png", ok=False
    )
    assert result.exit_code == 1 and f"{short}: 2 labels for the 12 texts of {embeddings_file}" in result.output
    result = run("plot", "map", embeddings_file, "--method", "pca", "-o", tmp_path / "m.jpg", ok=False)
    assert result.exit_code == 2 and "unknown picture format '.jpg'" in result.output
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result = run("plot", "map", empty, "--method", "pca", "-o", tmp_path / "m.png", ok=False)
    assert result.exit_code == 1 and f"{empty}: no texts" in result.output
    assert not (tmp_path / "m.png").exists()


def test_training_and_retrieval_pictures_from_their_files(tmp_path):
    run_dir = tmp_path / "model.train"
    run_dir.mkdir()
    rows = [{"step": s, "epoch": 0, "objective": "sts", "loss": 1.0 / s, "lr": 1e-5} for s in (1, 2, 3)]
    (run_dir / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "t.html"
    run("plot", "training", run_dir, "--name", "first", "--out", out)
    traces, _ = html_traces(out)
    assert traces[0]["name"] == "first" and list(traces[0]["y"]) == [1.0, 0.5, 1.0 / 3]
    missing = run("plot", "training", tmp_path, "--out", tmp_path / "x.png", ok=False)
    assert missing.exit_code == 1 and "no log.jsonl" in missing.output

    rankings = {
        "format": "sbert-rankings/1",
        "name": "toy",
        "model": "m",
        "queries": [{"id": "q", "relevant": ["b"], "hits": [["a", 0.5], ["b", 0.4]]}],
    }
    (tmp_path / "r.json").write_text(json.dumps(rankings))
    run("plot", "retrieval", tmp_path / "r.json", "--out", tmp_path / "r.svg")
    assert "recall@k" in (tmp_path / "r.svg").read_text()
    run("plot", "retrieval", tmp_path / "r.json", "--out", tmp_path / "r.html")
    assert list(html_traces(tmp_path / "r.html")[0][0]["y"]) == [0.0, 1.0]


@pytest.mark.slow
def test_map_of_texts_coloured_by_clusters_and_a_heatmap(tmp_path):
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "map.html"
    run("plot", "map", corpus, "--clusters", "kmeans", "--k", "2", "--method", "pca", "--out", out)
    traces, layout = html_traces(out)
    groups = sorted(sorted(h.split("<br>")[0] for h in t["hovertext"]) for t in traces)
    assert groups == sorted([sorted(TEXTS[:3]), sorted(TEXTS[3:])])  # guitars apart from cats
    assert "k-means clusters (k=2)" in layout["title"]["text"] and "all-MiniLM-L6-v2" in layout["title"]["text"]
    heat = tmp_path / "h.html"
    run("plot", "heatmap", *TEXTS[:3], "--out", heat)
    z = np.asarray(html_traces(heat)[0][0]["z"], dtype=float).reshape(3, 3)
    np.testing.assert_allclose(np.diag(z), 1.0, atol=1e-5)
    assert z[0, 1] > 0.7 and z[0, 1] == pytest.approx(z[1, 0], abs=1e-6)


@pytest.mark.slow
def test_retrieval_of_a_beir_folder_saves_its_rankings(tmp_path):
    from test_plot import _beir

    folder = _beir(tmp_path)
    saved = tmp_path / "rankings.json"
    run("plot", "retrieval", folder, "--top-k", "3", "--save-rankings", saved, "--out", tmp_path / "r.png")
    body = json.loads(saved.read_text())
    assert [(q["id"], q["relevant"], len(q["hits"])) for q in body["queries"]] == [
        ("q1", ["d0"], 3),
        ("q2", ["d1", "d4"], 3),
    ]
    assert body["queries"][0]["hits"][0][0] == "d0"
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
