"""Retrieval training rows: a query, a positive and 0..n hard negatives, as ``.tsv`` or ``.jsonl``.

- ``.tsv``: one row per line, tab-separated, no quoting: query, positive, negative_1, ..., negative_n
  (rows may have different numbers of negatives). A first row starting ``query``/``anchor``,
  ``positive`` is a header and skipped.
- ``.jsonl``: one object per line: ``"query"``, ``"positive"`` and optionally ``"negatives"`` (a list of
  strings); other keys (ids, scores, as ``sbert mine-negatives`` writes) are ignored.

Either may be gzipped (``.gz``). Errors name the file and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sbert.atomic import atomic_file
from sbert.data.examples import RetrievalExample
from sbert.data.paths import numbered_lines
from sbert.errors import InputFileError

_TSV_LAYOUT = "tab-separated query, positive, negative_1, ..., negative_n (each non-empty)"
_JSON_LAYOUT = 'an object with string "query" and "positive" and optionally "negatives": [string, ...]'


def _is_jsonl(path: Path) -> bool:
    return path.name.endswith((".jsonl", ".jsonl.gz"))


def read_ntuples(path: str | Path) -> Iterator[RetrievalExample]:
    """Yield the rows of a ``.tsv`` or ``.jsonl`` file (see the module's docstring)."""
    path = Path(path)
    for number, line in numbered_lines(path):
        row = _json_row(line, path, number) if _is_jsonl(path) else _tsv_row(line, path, number)
        if row is not None:
            yield row


def _tsv_row(line: str, path: Path, number: int) -> RetrievalExample | None:
    cols = line.rstrip("\r\n").split("\t")
    if number == 1 and [c.strip().lower() for c in cols[:2]] in (["query", "positive"], ["anchor", "positive"]):
        return None
    if len(cols) < 2 or not all(c.strip() for c in cols):
        empty = next((i + 1 for i, c in enumerate(cols) if not c.strip()), None)
        found = f"column {empty} is empty" if len(cols) >= 2 else f"found {len(cols)} column"
        raise InputFileError(f"{path}: line {number}: {found}; expected {_TSV_LAYOUT}")
    return RetrievalExample(cols[0], cols[1], tuple(cols[2:]))


def _json_row(line: str, path: Path, number: int) -> RetrievalExample:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputFileError(f"{path}: line {number} is not valid JSON ({err.msg}); expected {_JSON_LAYOUT}") from None
    if not isinstance(record, dict):
        raise InputFileError(f"{path}: line {number}: expected {_JSON_LAYOUT}")
    texts = [record.get("query"), record.get("positive")]
    negatives = record.get("negatives", [])
    if not isinstance(negatives, list):
        raise InputFileError(f'{path}: line {number}: "negatives" is not a list; expected {_JSON_LAYOUT}')
    for key, value in [("query", texts[0]), ("positive", texts[1])] + [("negatives", n) for n in negatives]:
        if not isinstance(value, str) or not value.strip():
            raise InputFileError(f'{path}: line {number}: "{key}" holds {value!r}; expected {_JSON_LAYOUT}')
    return RetrievalExample(texts[0], texts[1], tuple(negatives))


def _tsv_field(text: str) -> str:
    """One line of a TSV column: tabs and line breaks become spaces (the ``.jsonl`` form keeps them)."""
    return " ".join(text.replace("\t", " ").splitlines())


def _tsv_header(rows: Sequence[RetrievalExample]) -> list[str]:
    """query, positive, negative_1..n; for triplets (one negative each) anchor, positive, negative, which
    the ``triplets`` format reads too."""
    widths = {len(r.negatives) for r in rows}
    if widths == {1}:
        return ["anchor", "positive", "negative"]
    return ["query", "positive", *(f"negative_{k + 1}" for k in range(max(widths, default=0)))]


def write_ntuples(
    path: str | Path, rows: Sequence[RetrievalExample], extras: Sequence[Mapping[str, Any]] | None = None
) -> Path:
    """Write ``rows`` atomically as ``.jsonl`` (texts exact; each row's ``extras`` mapping, if given,
    added to its object) or ``.tsv`` (a header, then one row per line; tabs and line breaks inside a
    text become spaces). Returns the path."""
    path = Path(path)
    if extras is not None and len(extras) != len(rows):
        raise ValueError(f"extras: {len(extras)} entries for {len(rows)} rows")
    jsonl = _is_jsonl(path)
    if not jsonl and not path.name.endswith(".tsv"):
        raise ValueError(f"{path}: expected a .jsonl or .tsv file name")
    with atomic_file(path, "w", encoding="utf-8") as handle:
        if not jsonl:
            handle.write("\t".join(_tsv_header(rows)) + "\n")
        for i, row in enumerate(rows):
            if jsonl:
                record = {"query": row.query, "positive": row.positive, "negatives": list(row.negatives)}
                handle.write(json.dumps({**record, **(extras[i] if extras else {})}, ensure_ascii=False) + "\n")
            else:
                handle.write("\t".join(_tsv_field(t) for t in (row.query, row.positive, *row.negatives)) + "\n")
    return path
