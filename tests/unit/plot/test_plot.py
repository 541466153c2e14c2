"""sbert.plot: each picture is written, and what it shows (points, cells, curves) is its input's data."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="sbert.plot needs the plot extra: pip install 'sbert[plot]'")
pytest.importorskip("plotly", reason="sbert.plot needs the plot extra: pip install 'sbert[plot]'")

from plot_helpers import html_traces

import sbert.plot
from sbert.errors import InputFileError
from sbert.plot.rankings import QueryRanking, Rankings


def _pca_by_hand(x: np.ndarray) -> np.ndarray:
    """The first two principal components of the unit rows, by SVD (signs free)."""
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    centred = unit - unit.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def _same_up_to_sign(a: np.ndarray, b: np.ndarray) -> None:
    for col in range(2):
        sign = np.sign(a[:, col] @ b[:, col])
        np.testing.assert_allclose(a[:, col], sign * b[:, col], atol=1e-8)


@pytest.fixture
def blobs() -> tuple[np.ndarray, list[str]]:
    """60 points in 3 well separated groups of 20 (8-d), and each point's group."""
    rng = np.random.default_rng(1)
    centres = np.eye(8)[:3] * 5
    x = np.concatenate([c + 0.3 * rng.normal(size=(20, 8)) for c in centres])
    return x, [name for name in ("red", "green", "blue") for _ in range(20)]


# -- map -------------------------------------------------------------------------------------------------
def test_pca_map_shows_every_point_at_its_projection_coloured_by_its_label(blobs, tmp_path):
    x, labels = blobs
    figure = sbert.plot.map(x, labels, method="pca", model="my-model")
    ax = figure.axes[0]
    shown = {c.get_gid(): np.asarray(c.get_offsets()) for c in ax.collections}
    assert set(shown) == {"red", "green", "blue"}
    expected = _pca_by_hand(x)
    points = np.concatenate([shown[g] for g in ("red", "green", "blue")])  # the labels' rows, in order
    _same_up_to_sign(points, expected)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["blue", "green", "red"]  # equal sizes: by name
    assert "PCA map of 60 embeddings (my-model)" in figure._suptitle.get_text()
    assert ax.get_xlabel().startswith("PC 1 (") and "% of variance" in ax.get_ylabel()
    out = sbert.plot.save(figure, tmp_path / "map.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = sbert.plot.save(figure, tmp_path / "map.svg").read_text(encoding="utf-8")
    assert svg.count('xlink:href="#') >= 60  # one marker use per point


def test_a_large_map_shows_a_seeded_sample_and_says_so(blobs):
    x, labels = blobs
    figure = sbert.plot.map(x, labels, method="pca", max_points=25, seed=3)
    ax = figure.axes[0]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 25
    assert "random sample of 25 of 60 points shown (seed 3)" in ax.get_title()
    assert figure._suptitle.get_text() == "PCA map of 60 embeddings"
    again = sbert.plot.map(x, labels, method="pca", max_points=25, seed=3).axes[0]
    for a, b in zip(ax.collections, again.collections, strict=True):
        np.testing.assert_array_equal(a.get_offsets(), b.get_offsets())
    assert "random sample" not in sbert.plot.map(x, labels, method="pca").axes[0].get_title()


def test_html_map_hover_shows_each_text_and_its_group(blobs, tmp_path):
    x, labels = blobs
    texts = [f"text number {i}" for i in range(len(x))]
    figure = sbert.plot.map(x, labels, texts=texts, method="pca", backend="plotly", max_points=40)
    traces, layout = html_traces(sbert.plot.save(figure, tmp_path / "map.html"))
    assert sum(len(t["x"]) for t in traces) == 40 == sum(len(t["hovertext"]) for t in traces)
    for trace in traces:
        for row, hover in zip(trace["customdata"], trace["hovertext"], strict=True):
            assert hover == f"text number {row}<br><i>{labels[row]}</i>"
    assert "random sample of 40 of 60 points" in layout["title"]["text"]
    assert "<script" in (tmp_path / "map.html").read_text()[:2000] or "plotly" in (tmp_path / "map.html").read_text()


def test_map_coloured_by_kmeans_clusters_finds_the_groups(blobs):
    x, _labels = blobs
    figure = sbert.plot.map(x, method="pca", clusters="kmeans", cluster_options={"k": 3})
    ax = figure.axes[0]
    groups = {c.get_gid(): len(c.get_offsets()) for c in ax.collections}
    assert groups == {"cluster 0": 20, "cluster 1": 20, "cluster 2": 20}
    assert "k-means clusters (k=3)" in ax.get_title()


def test_clusters_are_named_by_their_most_central_text(blobs):
    x, _labels = blobs
    texts = [f"text {i}" for i in range(len(x))]
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    central = [
        20 * g + int(np.argmax(unit[20 * g : 20 * g + 20] @ unit[20 * g : 20 * g + 20].mean(0))) for g in range(3)
    ]
    figure = sbert.plot.map(x, texts=texts, method="pca", clusters="kmeans", cluster_options={"k": 3}, backend="plotly")
    for trace in figure.data:  # each cluster is one blob, named by that blob's central text
        blob = {int(r) // 20 for r in trace.customdata}
        assert len(trace.customdata) == 20 and len(blob) == 1
        assert trace.name.startswith("cluster ") and trace.name.endswith(f": text {central[blob.pop()]}")


@pytest.mark.slow  # seconds each on a busy CPU (umap: numba compiles first)
@pytest.mark.parametrize("method", ["tsne", "umap"])
def test_umap_and_tsne_maps_keep_the_groups_apart(blobs, method):
    x, _labels = blobs
    points, axes = sbert.plot.project(x, method)
    assert points.shape == (60, 2) and np.isfinite(points).all() and axes[0].endswith(" 1")
    again, _ = sbert.plot.project(x, method)
    np.testing.assert_allclose(points, again)  # seeded
    # the groups stay apart: every point is nearer its own group's centre than another's
    centres = np.stack([points[i * 20 : (i + 1) * 20].mean(axis=0) for i in range(3)])
    nearest = np.argmin(((points[:, None] - centres[None]) ** 2).sum(-1), axis=1)
    assert (nearest == np.repeat(np.arange(3), 20)).all(), method


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda x: sbert.plot.map(x, ["a", "b"], method="pca"), "2 labels for 60 points"),
        (lambda x: sbert.plot.map(x[:0], method="pca"), "nothing to map"),
        (lambda x: sbert.plot.map(x, ["a"] * 60, clusters="kmeans", method="pca"), "labels or clusters, not both"),
        (lambda x: sbert.plot.map(x, method="mds"), "method must be one of umap, pca, tsne"),
        (lambda x: sbert.plot.map(x, method="pca", texts=["a"]), "1 texts for 60 embeddings"),
        (lambda x: sbert.plot.map(x, method="pca", backend="bokeh"), "backend must be one of"),
    ],
)
def test_map_refuses_bad_input_with_a_clear_message(blobs, call, message):
    with pytest.raises(ValueError, match=message):
        call(blobs[0])


def test_a_figure_goes_only_to_a_format_its_library_writes(blobs, tmp_path):
    figure = sbert.plot.map(blobs[0], method="pca")
    with pytest.raises(ValueError, match=r"\.html file needs a plotly figure"):
        sbert.plot.save(figure, tmp_path / "map.html")
    with pytest.raises(ValueError, match=r"unknown picture format '\.jpeg'"):
        sbert.plot.save(figure, tmp_path / "map.jpeg")
    assert not list(tmp_path.iterdir())


def test_a_label_field_is_read_for_the_records_the_corpus_keeps(tmp_path):
    from sbert.plot.inputs import read_label_field

    path = tmp_path / "c.jsonl"
    rows = [{"text": "a", "topic": "x"}, {"text": " ", "topic": "y"}, {"text": "b", "topic": 3}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert read_label_field(path, "topic", skip_empty=True) == ["x", "3"]
    assert read_label_field(path, "topic") == ["x", "y", "3"]
    with pytest.raises(InputFileError, match=r"c\.jsonl: line 1: no 'source' field"):
        read_label_field(path, "source")


# -- heatmap ---------------------------------------------------------------------------------------------
TEXTS = ["A man plays the guitar.", "Someone plays music.", "A cat sleeps.", "The market fell sharply today."]


def test_heatmap_cells_and_axes_are_the_matrix_and_the_texts(tmp_path):
    matrix = np.array([[1.0, 0.61, 0.1, 0.0], [0.61, 1.0, 0.2, -0.05], [0.1, 0.2, 1.0, 0.3], [0.0, -0.05, 0.3, 1.0]])
    figure = sbert.plot.heatmap(TEXTS, matrix=matrix, width=12)
    ax = figure.axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), matrix)
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    assert cells == {(r, c): f"{matrix[r, c]:.2f}" for r in range(4) for c in range(4)}
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "1. A man plays…",
        "2. Someone pla…",
        "3. A cat sleep…",
        "4. The market…",
    ]
    sbert.plot.save(figure, tmp_path / "h.png")
    traces, _layout = html_traces(
        sbert.plot.save(sbert.plot.heatmap(TEXTS, matrix=matrix, backend="plotly"), tmp_path / "h.html")
    )
    np.testing.assert_allclose(np.asarray(traces[0]["z"], dtype=float).reshape(4, 4), matrix)
    assert traces[0]["hovertext"][0][1] == f"{TEXTS[0]}<br>{TEXTS[1]}<br>cosine 0.6100"


def test_heatmap_cells_equal_the_cosine_of_the_texts_embeddings(model):
    figure = sbert.plot.heatmap(TEXTS, model=model)
    embeddings = model.encode(TEXTS)
    expected = sbert.similarity.cosine(embeddings, embeddings)
    np.testing.assert_allclose(figure.axes[0].images[0].get_array(), expected, atol=1e-5)
    assert "(all-MiniLM-L6-v2)" in figure.axes[0].get_title()


def test_heatmap_refuses_too_few_texts_or_a_matrix_of_another_size():
    with pytest.raises(ValueError, match="2 to 60 texts; got 1"):
        sbert.plot.heatmap(["alone"], matrix=np.ones((1, 1)))
    with pytest.raises(ValueError, match=r"shape \(3, 3\) for 2 texts"):
        sbert.plot.heatmap(["a", "b"], matrix=np.ones((3, 3)))


# -- training --------------------------------------------------------------------------------------------
def _write_run(folder, losses, lrs, dev=(), objectives=("sts",)):
    """A log.jsonl with the rows sbert.training.Trainer writes."""
    folder.mkdir(parents=True)
    rows = []
    for step, (loss, lr) in enumerate(zip(losses, lrs, strict=True), 1):
        objective = objectives[(step - 1) % len(objectives)]
        rows.append({"step": step, "epoch": 0, "objective": objective, "loss": loss, "lr": lr})
        for at, score in dev:
            if at == step:
                rows.append(
                    {"step": step, "dev": {"spearman": score, "pearson": 0.0}, "primary": "spearman", "best": True}
                )
    rows.append({"summary": {"steps": len(losses)}})
    (folder / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_training_curves_are_the_logged_values_of_each_run(tmp_path):
    first = _write_run(
        tmp_path / "a.train", [0.9, 0.7, 0.6, 0.4], [1e-5, 2e-5, 1.5e-5, 1e-5], dev=[(2, 0.5), (4, 0.75)]
    )
    second = _write_run(tmp_path / "b.train", [1.2, 1.0, 0.8], [3e-5, 2e-5, 1e-5], objectives=("nli", "sts"))
    figure = sbert.plot.training([first, second])
    loss, lr, dev = figure.axes
    lines = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in loss.lines}
    assert lines == {"a": ([1, 2, 3, 4], [0.9, 0.7, 0.6, 0.4]), "b: nli": ([1, 3], [1.2, 0.8]), "b: sts": ([2], [1.0])}
    rates = {line.get_label(): list(line.get_ydata()) for line in lr.lines}
    assert rates == {"a": [1e-5, 2e-5, 1.5e-5, 1e-5], "b": [3e-5, 2e-5, 1e-5]}
    assert [(list(x.get_xdata()), list(x.get_ydata()), x.get_label()) for x in dev.lines] == [
        ([2, 4], [0.5, 0.75], "a (spearman)")
    ]
    assert figure._suptitle.get_text() == "Training: a, b" and loss.get_xlabel() == "step"
    traces, _ = html_traces(sbert.plot.save(sbert.plot.training(first, backend="plotly"), tmp_path / "t.html"))
    assert [list(t["y"]) for t in traces] == [[0.9, 0.7, 0.6, 0.4], [1e-5, 2e-5, 1.5e-5, 1e-5], [0.5, 0.75]]


def test_training_finds_the_log_beside_a_model_folder(tmp_path):
    _write_run(tmp_path / "model.train", [0.5], [1e-5])
    (tmp_path / "model").mkdir()
    assert sbert.plot.read_log(tmp_path / "model").loss == {"sts": ([1], [0.5])}


def test_training_refuses_a_folder_without_a_log_or_a_bad_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileError, match=r"empty: no log\.jsonl"):
        sbert.plot.training([tmp_path / "empty"])
    with pytest.raises(InputFileError, match="missing: no such folder"):
        sbert.plot.training([tmp_path / "missing"])
    run = _write_run(tmp_path / "r", [0.5, 0.4], [1e-5, 1e-5])
    with open(run / "log.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"step": 3, "loss": \n')
    with pytest.raises(InputFileError, match=r"log\.jsonl: line 4 is not valid JSON"):
        sbert.plot.training([run])
    (run / "log.jsonl").write_text(json.dumps({"summary": {}}) + "\n")
    with pytest.raises(InputFileError, match="no training steps logged"):
        sbert.plot.training([run])


# -- retrieval -------------------------------------------------------------------------------------------
def _rankings() -> Rankings:
    return Rankings(
        "tiny",
        "m",
        [
            QueryRanking("q1", ["a", "b"], [("a", 0.9), ("c", 0.8), ("b", 0.7), ("d", 0.1)]),
            QueryRanking("q2", ["e"], [("f", 0.6), ("g", 0.5), ("h", 0.4), ("e", 0.3)]),
        ],
    )


def test_recall_curve_is_the_hand_computed_recall_at_each_k(tmp_path):
    # q1: a at 1, b at 3 of 2 relevant; q2: e at 4 -> recall@1..4 = (.5+0)/2, (.5+0)/2, (1+0)/2, (1+1)/2
    expected = [0.25, 0.25, 0.5, 1.0]
    path = sbert.plot.write_rankings(_rankings(), tmp_path / "r.json")
    figure = sbert.plot.retrieval(path)
    left, right = figure.axes
    curve = left.lines[0]
    assert list(curve.get_xdata()) == [1, 2, 3, 4] and list(curve.get_ydata()) == expected
    assert left.get_ylabel() == "mean recall@k" and "tiny (m, 2 queries)" in figure._suptitle.get_text()
    assert [t.get_text() for t in right.get_legend().get_texts()] == [
        "tiny (m): relevant (3)",
        "tiny (m): not relevant (5)",
    ]
    traces, _ = html_traces(sbert.plot.save(sbert.plot.retrieval(path, backend="plotly", bins=4), tmp_path / "r.html"))
    assert list(traces[0]["y"]) == expected
    edges = np.histogram_bin_edges([0.9, 0.7, 0.3, 0.8, 0.1, 0.6, 0.5, 0.4], bins=4)
    np.testing.assert_allclose(traces[1]["y"], np.histogram([0.9, 0.7, 0.3], edges, density=True)[0])
    np.testing.assert_allclose(traces[2]["y"], np.histogram([0.8, 0.1, 0.6, 0.5, 0.4], edges, density=True)[0])


def test_rankings_file_round_trips_and_bad_files_name_the_query(tmp_path):
    path = sbert.plot.write_rankings(_rankings(), tmp_path / "r.json")
    assert sbert.plot.read_rankings(path) == _rankings()
    body = json.loads(path.read_text())
    body["queries"][1]["relevant"] = []
    path.write_text(json.dumps(body))
    with pytest.raises(InputFileError, match=r"r\.json: query 2 \(query 'q2'\): no relevant document"):
        sbert.plot.read_rankings(path)
    body["queries"][1] = {"id": "q2", "hits": []}
    path.write_text(json.dumps(body))
    with pytest.raises(InputFileError, match=r"query 2: expected \{\"id\""):
        sbert.plot.read_rankings(path)
    path.write_text("[]")
    with pytest.raises(InputFileError, match="sbert-rankings/1"):
        sbert.plot.read_rankings(path)


def test_rank_gives_the_evaluators_recall(model, tmp_path):
    from sbert.data.beir import read_beir
    from sbert.evaluation.retrieval import RetrievalEvaluator

    folder = _beir(tmp_path)
    collection = read_beir(folder)
    rankings = sbert.plot.rank(model, collection, k=5)
    metrics = RetrievalEvaluator(collection, latency_queries=0, at={"ndcg": (10,), "recall": (1, 3)})(model)
    curve = rankings.recall_curve([1, 3])
    assert curve * 100 == pytest.approx([metrics["recall@1"], metrics["recall@3"]], abs=1e-9)
    assert rankings.model == "all-MiniLM-L6-v2" and [q.id for q in rankings.queries] == ["q1", "q2"]
    assert all(len(q.hits) == 5 for q in rankings.queries)


def _beir(root):
    """A BEIR folder of 6 documents and 2 queries."""
    folder = root / "beir"
    (folder / "qrels").mkdir(parents=True)
    docs = [
        "Guitars have six strings.",
        "Cats sleep most of the day.",
        "The stock market fell.",
        "Bread is baked from flour.",
        "Kittens are young cats.",
        "A violin has four strings.",
    ]
    corpus = "".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n" for i, t in enumerate(docs))
    (folder / "corpus.jsonl").write_text(corpus)
    queries = [{"_id": "q1", "text": "how many strings does a guitar have"}, {"_id": "q2", "text": "sleeping cats"}]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\nq2\td1\t1\nq2\td4\t1\n")
    return folder


def test_importing_sbert_plot_and_the_cli_loads_no_plotting_library():
    code = (
        "import sys, sbert, sbert.cli, sbert.plot; "
        "print(sorted(m for m in ('matplotlib', 'plotly', 'umap', 'torch') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
