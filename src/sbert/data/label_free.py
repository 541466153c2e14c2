"""Label-free and distillation training data.

- ``read_texts``: texts alone (SimCSE, TSDAE, embedding distillation): a text file (one per line), a
  ``.jsonl`` of ``{"text": ...}`` objects, or a BEIR folder (its documents, title and text).
- ``read_distillation``: (query, positive, negatives, teacher scores) rows, as ``.tsv`` or ``.jsonl``
  (may be gzipped):

  - ``.tsv``: query, positive, negative, margin (teacher(q, p) - teacher(q, n)); a first row starting
    ``query``, ``positive`` is a header and skipped;
  - ``.jsonl``: ``"query"``, ``"positive"``, ``"negatives"`` (a list) and either ``"scores"`` (the
    teacher's scores of the positive and of each negative) or ``"margins"`` (one per negative).

Errors name the file and the line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from sbert.data.examples import DistillationExample, Text
from sbert.data.paths import numbered_lines
from sbert.errors import InputFileError

_TSV_LAYOUT = "tab-separated query, positive, negative, margin (a number)"
_JSON_LAYOUT = (
    'an object with string "query", "positive", "negatives": [string, ...] and "scores": [positive\'s, '
    'each negative\'s] or "margins": [one per negative]'
)


def read_texts(path: str | Path) -> list[Text]:
    """The texts of a text file, a ``.jsonl`` of ``{"text": ...}`` or a BEIR folder's documents; empty
    lines and documents are skipped."""
    path = Path(path)
    if path.is_dir():
        from sbert.data.beir import beir_file, read_beir_documents

        documents, _ = read_beir_documents(beir_file(path, "corpus.jsonl"), skip_empty=True)
        return [Text(d.joined()) for d in documents.values()]
    from sbert.data.corpus import read_corpus

    return [Text(t) for t in read_corpus(path, skip_empty=True).joined()]


def read_distillation(path: str | Path) -> list[DistillationExample]:
    """The rows of a ``.tsv`` or ``.jsonl`` distillation file (see the module's docstring)."""
    path = Path(path)
    jsonl = path.name.endswith((".jsonl", ".jsonl.gz"))
    rows = []
    for number, line in numbered_lines(path):
        row = _json_row(line, path, number) if jsonl else _tsv_row(line, path, number)
        if row is not None:
            rows.append(row)
    return rows


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and not isinstance(value, bool) else None


def _tsv_row(line: str, path: Path, number: int) -> DistillationExample | None:
    cols = line.rstrip("\r\n").split("\t")
    if number == 1 and [c.strip().lower() for c in cols[:2]] == ["query", "positive"]:
        return None
    if len(cols) != 4 or not all(c.strip() for c in cols[:3]):
        raise InputFileError(f"{path}: line {number}: found {len(cols)} columns; expected {_TSV_LAYOUT}")
    margin = _number(cols[3])
    if margin is None:
        raise InputFileError(f"{path}: line {number}: margin {cols[3]!r} is not a number; expected {_TSV_LAYOUT}")
    return DistillationExample(cols[0], cols[1], (cols[2],), (margin, 0.0))


def _json_row(line: str, path: Path, number: int) -> DistillationExample:
    where = f"{path}: line {number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputFileError(f"{where} is not valid JSON ({err.msg}); expected {_JSON_LAYOUT}") from None
    if not isinstance(record, dict):
        raise InputFileError(f"{where}: expected {_JSON_LAYOUT}")
    negatives = record.get("negatives")
    texts = [("query", record.get("query")), ("positive", record.get("positive"))]
    if not isinstance(negatives, list) or not negatives:
        raise InputFileError(f'{where}: "negatives" holds {negatives!r}; expected {_JSON_LAYOUT}')
    for key, value in texts + [("negatives", n) for n in negatives]:
        if not isinstance(value, str) or not value.strip():
            raise InputFileError(f'{where}: "{key}" holds {value!r}; expected {_JSON_LAYOUT}')
    key, wanted = ("scores", len(negatives) + 1) if "scores" in record else ("margins", len(negatives))
    values = record.get(key)
    numbers = [_number(v) for v in values] if isinstance(values, list) else []
    if len(numbers) != wanted or None in numbers:
        raise InputFileError(f'{where}: "{key}" holds {values!r}; expected {wanted} numbers ({_JSON_LAYOUT})')
    scores = tuple(numbers) if key == "scores" else (0.0, *(-m for m in numbers))
    return DistillationExample(texts[0][1], texts[1][1], tuple(negatives), scores)
