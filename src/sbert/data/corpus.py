"""Corpora for indexing, mining and clustering: plain text (one per line) or JSON lines with ids."""

from __future__ import annotations

import json
from pathlib import Path

from sbert.data.lines import read_lines
from sbert.data.paths import numbered_lines
from sbert.errors import InputFileError


def read_corpus(source: str | Path, *, skip_empty: bool = False) -> tuple[list[str] | None, list[str]]:
    """(ids, texts) from a file: ``.jsonl`` lines are objects with ``"text"`` and optional ``"id"``
    (all or none); any other file (or '-') is UTF-8 text, one per line, and has no ids (None)."""
    if str(source) == "-" or not str(source).endswith((".jsonl", ".jsonl.gz")):
        return None, read_lines(source, skip_empty=skip_empty)
    path = Path(source)
    if not path.is_file():
        raise InputFileError(f"{path}: no such file")
    ids: list[str] = []
    texts: list[str] = []
    for number, line in numbered_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputFileError(f"{path}: line {number} is not valid JSON ({err.msg})") from err
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str) or (not text.strip() and not skip_empty):
            raise InputFileError(f'{path}: line {number}: expected an object with a non-empty string "text"')
        if not text.strip():
            continue
        if "id" in record:
            ids.append(str(record["id"]))
        texts.append(text)
    if ids and len(ids) != len(texts):
        raise InputFileError(f'{path}: {len(ids)} of {len(texts)} records have an "id"; give all or none')
    return ids or None, texts
