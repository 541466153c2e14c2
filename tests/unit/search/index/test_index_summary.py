"""What an index holds, as ``sbert index info`` prints it: the index's own summary, computed by the library."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from sbert.cli import main
from sbert.search.index.folder import VectorIndex
from sbert.search.retrieve import index_summary


def test_index_info_prints_the_librarys_summary(tmp_path):
    vectors = np.eye(4, dtype=np.float32)
    texts = ["cats purr", "dogs bark", "birds sing", "fish swim"]
    index = VectorIndex.build(tmp_path / "ix", vectors, model="default", texts=texts, bm25=True)
    index.delete(["1"])
    summary = index_summary(VectorIndex.open(tmp_path / "ix"))
    assert (summary["rows"], summary["deleted"], summary["dim"], summary["metric"]) == (3, 1, 4, "cosine")
    assert (summary["documents"], summary["bm25"], summary["segments"]) == (None, True, 1)
    assert summary["model"] == "all-MiniLM-L6-v2"  # the name "default" stands for
    shown = CliRunner().invoke(main, ["index", "info", str(tmp_path / "ix"), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == json.loads(json.dumps(summary))
    rows = CliRunner().invoke(main, ["index", "info", str(tmp_path / "ix")]).stdout.splitlines()
    assert rows[0].split() == ["rows", "3", "(1", "deleted)"] and rows[-1].startswith("bm25            yes")
