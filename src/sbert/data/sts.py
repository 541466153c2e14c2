"""Reader for the STS benchmark (Cer et al., 2017): tab-separated, no quoting, scores 0-5."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sbert.data.paths import open_text
from sbert.errors import InputFileError


@dataclass(frozen=True)
class ScoredPair:
    """Two sentences and a gold similarity score, as the file gives it (STSb: 0-5)."""

    sentence1: str
    sentence2: str
    score: float


def read_stsb(path: str | Path) -> Iterator[ScoredPair]:
    """Yield the pairs of an STSb file (``sts-train.csv``, ``-dev``, ``-test``; ``.gz`` or not).

    Columns: genre, file, year, id, score, sentence1, sentence2, and on some lines two extra source
    columns. Quote characters are text, not quoting. Any other shape raises ``InputFileError``.
    """
    with open_text(path) as handle:
        name = getattr(handle, "name", str(path))
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            cols = line.split("\t")
            if len(cols) not in (7, 9):
                raise InputFileError(
                    f"{name}: line {number} has {len(cols)} tab-separated columns; expected 7 "
                    "(genre, file, year, id, score, sentence1, sentence2) or 9"
                )
            try:
                score = float(cols[4])
            except ValueError:
                raise InputFileError(f"{name}: line {number}: score {cols[4]!r} is not a number") from None
            if not 0.0 <= score <= 5.0:
                raise InputFileError(f"{name}: line {number}: score {score} is outside 0-5")
            yield ScoredPair(cols[5], cols[6], score)
