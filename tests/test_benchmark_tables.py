"""The benchmarks' guard against a partial re-run dropping the rows of a committed table (benchmarks/common.py)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from common import row_names, rows_lost

BEGIN, END = "<!-- b -->", "<!-- e -->"
TABLE = ["## scifact", "", "| model | NDCG |", "|---|---|", "| default | 64.51 |", "| adapt title | 65.84 |", ""]


def test_row_names_by_section_without_headers_or_separators():
    lines = [*TABLE, "## openoffice", "", "| model | MRR |", "|:--|--:|", "| default | 61.17 |"]
    assert row_names(lines) == {"scifact|default", "scifact|adapt title", "openoffice|default"}


def test_rows_lost_names_what_a_partial_run_would_drop(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n" + BEGIN + "\n" + "\n".join(TABLE) + "\n" + END + "\nafter\n", encoding="utf-8")
    assert rows_lost(doc, BEGIN, END, TABLE) == []
    partial = [line for line in TABLE if "title" not in line] + ["| adapt crop | 65.40 |"]
    assert rows_lost(doc, BEGIN, END, partial) == ["scifact|adapt title"]
    assert rows_lost(doc, "<!-- none -->", END, partial) == []  # no block yet: nothing to lose


def test_keep_rows_replaces_a_row_in_place_adds_new_ones_and_drops_none(tmp_path, monkeypatch):
    import adapt

    monkeypatch.setattr(adapt, "RECORDS", tmp_path)
    first = [adapt.Row("default model, dense", {"ndcg@10": 64.51}), adapt.Row("adapt title, dense", {"ndcg@10": 65.8})]
    adapt.keep_rows("scifact", first, "run one")
    record = tmp_path / "adapt" / "scifact.json"
    record.write_text(record.read_text().replace('"runs"', '"note": "kept", "runs"'))  # a note survives a run
    again = [adapt.Row("adapt title, dense", {"ndcg@10": 66.0}), adapt.Row("adapt crop, dense", {"ndcg@10": 65.4})]
    rows, runs = adapt.keep_rows("scifact", again, "run two")
    assert [(r.name, r.metrics["ndcg@10"]) for r in rows] == [
        ("default model, dense", 64.51),
        ("adapt title, dense", 66.0),
        ("adapt crop, dense", 65.4),
    ]
    assert runs == ["run one", "run two"]
    assert adapt.read_record("scifact") == (rows, runs)
    assert '"note": "kept"' in record.read_text()
    assert adapt.read_record("nowhere") == ([], [])


def test_the_committed_records_rebuild_the_committed_adapt_tables_row_for_row():
    import adapt

    results, runs = {}, {}
    for name in adapt.COLLECTIONS:
        results[name], runs[name] = adapt.read_record(name)
    built = [line for line in adapt.document_lines(results, runs, "test", 100) if line.startswith("|")]
    text = adapt.DOC.read_text(encoding="utf-8")
    committed = text.split(adapt.BEGIN, 1)[1].split(adapt.END, 1)[0].splitlines()
    assert built == [line for line in committed if line.startswith("|")]


def test_the_committed_static_matryoshka_record_holds_the_committed_table():
    import static

    record = json.loads((static.RECORDS / "static" / "matryoshka.json").read_text(encoding="utf-8"))
    text = static.DOC.read_text(encoding="utf-8")
    committed = text.split(static.MRL_BEGIN, 1)[1].split(static.MRL_END, 1)[0].splitlines()
    table = [line for line in record["lines"] if line.startswith("|")]
    assert len(table) == 2 + 3 * len(static.MRL_DIMS)  # a header, a separator, three models at each width
    assert table == [line for line in committed if line.startswith("|")]
    assert record["facts"]["Matryoshka-trained|128"]["stsb"] == pytest.approx(83.50, abs=0.005)
