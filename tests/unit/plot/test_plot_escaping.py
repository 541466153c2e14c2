"""Labels and texts in interactive (plotly) pictures are shown, never obeyed: plotly reads some HTML in its
text fields, so a label like ``<a href=...>`` or ``<span style=...>`` must reach the file escaped."""

from __future__ import annotations

import json

import numpy as np
import pytest
from plot_helpers import html_traces

import sbert.plot
from sbert.plot.style import plain

pytest.importorskip("plotly")

HOSTILE = ['<span style="font-size:200px">BIG</span>', '<a href="https://evil.example">click</a>', "fish & <b>chips"]
LIVE = ("<span style", "<a href", "<b>", "\\u003cspan", "\\u003ca href", "\\u003cb\\u003e")


def _strings(value) -> list[str]:
    """Every string inside a decoded plotly trace or layout."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _check_escaped(path) -> list[str]:
    raw = path.read_text(encoding="utf-8")
    traces, layout = html_traces(path)
    shown = _strings(traces) + _strings(layout)
    for tag in LIVE:
        assert not any(tag in s for s in shown), f"{tag!r} reaches the figure as a live tag"
    figure_json = raw[raw.index("Plotly.newPlot") :]
    for tag in LIVE[:3]:
        assert tag not in figure_json.split("</script>")[0], f"{tag!r} is in the written figure"
    return shown


def test_map_legend_and_hover_show_hostile_labels_and_texts_escaped(tmp_path):
    points = np.random.default_rng(0).normal(size=(6, 8))
    labels, texts = [HOSTILE[i % 3] for i in range(6)], [HOSTILE[(i + 1) % 3] for i in range(6)]
    figure = sbert.plot.map(points, labels, texts=texts, method="pca", backend="plotly")
    shown = _check_escaped(sbert.plot.save(figure, tmp_path / "map.html"))
    assert '&lt;span style="font-size:200px"&gt;BIG&lt;/span&gt;' in shown  # the legend entry, as written
    assert any('&lt;a href="https://evil.example"&gt;click&lt;/a&gt;<br>' in s for s in shown)  # hover


def test_heatmap_and_training_curves_escape_their_labels(tmp_path):
    matrix = np.eye(3)
    heat = sbert.plot.heatmap(HOSTILE, matrix=matrix, backend="plotly", width=200)
    shown = _check_escaped(sbert.plot.save(heat, tmp_path / "heat.html"))
    assert "3. fish &amp; &lt;b&gt;chips" in shown
    run = tmp_path / "run.train"
    run.mkdir()
    rows = [{"step": 1, "epoch": 0, "objective": "sts", "loss": 0.5, "lr": 1e-5}, {"summary": {"steps": 1}}]
    (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    curves = sbert.plot.training([run], names=[HOSTILE[1]], backend="plotly")
    _check_escaped(sbert.plot.save(curves, tmp_path / "curves.html"))


def test_cluster_names_drop_markdown_for_a_readable_legend():
    assert plain("## **Set-up**: two [commands](docs/x.md)") == "Set-up: two commands"
    assert plain("use `encode` on snake_case_names, *not* 2 * 3") == "use encode on snake_case_names, not 2 * 3"
