"""Labels in PNG/SVG/PDF pictures are drawn as written: a ``$`` in a user's label, title or tick label never
starts matplotlib's mathtext (``$\\foo$`` used to fail the command, ``Cost $5 to $10`` was drawn in italics as
"Cost 5to10"), while the numbers matplotlib writes itself (a log axis's powers of ten) keep their mathtext."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

import sbert.plot
from sbert.cli import main

matplotlib = pytest.importorskip("matplotlib")

DOLLARS = "Cost $5 to $10"
BAD_MATH = "$\\foo$"


def _svg_texts(path) -> list[str]:
    """The texts an SVG holds as <text> elements (written with svg.fonttype "none": text, not glyph paths)."""
    return re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text(encoding="utf-8"))


def _invoke(*args: str):
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture()
def run(tmp_path):
    folder = tmp_path / "run.train"
    folder.mkdir()
    rows = [
        {"step": 1, "epoch": 0, "objective": "sts", "loss": 0.5, "lr": 1e-5},
        {"step": 2, "epoch": 0, "objective": "sts", "loss": 0.4, "lr": 1e-5},
        {"summary": {"steps": 2}},
    ]
    (folder / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_a_label_that_is_bad_mathtext_no_longer_fails_the_command(run, tmp_path, suffix):
    out = tmp_path / f"curves{suffix}"
    result = _invoke("plot", "training", run, "--name", BAD_MATH, "--out", out)
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0


def test_training_legend_and_title_keep_their_dollars(run, tmp_path):
    out = tmp_path / "curves.svg"
    result = _invoke("plot", "training", run, "--name", DOLLARS, "--out", out)
    assert result.exit_code == 0, result.output
    texts = _svg_texts(out)
    assert DOLLARS in texts and f"Training: {DOLLARS}" in texts


def test_map_legend_from_a_labels_file_keeps_its_dollars(tmp_path):
    points = tmp_path / "points.npy"
    np.save(points, np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32))
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join([DOLLARS, BAD_MATH] * 3) + "\n", encoding="utf-8")
    out = tmp_path / "map.svg"
    result = _invoke("plot", "map", points, "--labels", labels, "--method", "pca", "--out", out)
    assert result.exit_code == 0, result.output
    texts = _svg_texts(out)
    assert DOLLARS in texts and BAD_MATH in texts


def test_heatmap_tick_labels_keep_their_dollars(tmp_path):
    figure = sbert.plot.heatmap([BAD_MATH, DOLLARS], matrix=np.eye(2), width=40)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        sbert.plot.save(figure, tmp_path / "heat.svg")
    sbert.plot.save(figure, tmp_path / "heat.png")
    texts = _svg_texts(tmp_path / "heat.svg")
    assert f"1. {BAD_MATH}" in texts and f"2. {DOLLARS}" in texts


def test_matplotlib_s_own_log_axis_labels_keep_their_mathtext(tmp_path):
    from matplotlib.ticker import ScalarFormatter

    from sbert.plot.figure import new_figure

    figure = new_figure()
    ax = figure.add_subplot()
    ax.plot([1, 2, 5, 8], [0, 1, 2, 3], label=DOLLARS)
    ax.set(xscale="log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.legend()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        sbert.plot.save(figure, tmp_path / "log.svg")
    texts = _svg_texts(tmp_path / "log.svg")
    assert DOLLARS in texts
    assert not any("mathdefault" in t for t in texts)  # "2×10⁰" drawn as mathtext, not shown as its markup
    minor = [label for label in ax.xaxis.get_ticklabels(minor=True) if label.get_text()]
    assert minor and all(label.get_parse_math() for label in minor)
