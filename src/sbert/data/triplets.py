"""Reader for triplet files: anchor, positive, negative per line, tab- or comma-separated."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from sbert.data.examples import Triplet
from sbert.data.paths import open_text
from sbert.errors import InputFileError

_HEADER = ("anchor", "positive", "negative")


def read_triplets(path: str | Path) -> Iterator[Triplet]:
    """Yield triplets from ``.tsv`` (tab, no quoting) or ``.csv`` (comma, standard quoting).

    The first three columns are anchor, positive, negative; a first row naming them is skipped.
    """
    path = Path(path)
    is_csv = path.name.endswith((".csv", ".csv.gz"))
    with open_text(path) as handle:
        rows = csv.reader(handle) if is_csv else (line.rstrip("\r\n").split("\t") for line in handle)
        for number, cols in enumerate(rows, start=1):
            if not cols or cols == [""]:
                continue
            if number == 1 and tuple(c.strip().lower() for c in cols[:3]) == _HEADER:
                continue
            if len(cols) < 3 or not all(c.strip() for c in cols[:3]):
                sep = "comma" if is_csv else "tab"
                raise InputFileError(
                    f"{path}: line {number}: expected 3 non-empty {sep}-separated columns "
                    f"(anchor, positive, negative), found {len(cols)}"
                )
            yield Triplet(cols[0], cols[1], cols[2])
