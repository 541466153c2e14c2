"""The benchmarks' guard against a partial re-run dropping the rows of a committed table (benchmarks/common.py)."""

import sys
from pathlib import Path

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
