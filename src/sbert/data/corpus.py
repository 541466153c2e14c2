"""Corpora for encoding, indexing, mining, clustering and maps: plain text (one per line), JSON lines, or CSV/TSV
with a header row. The format follows the file's extension; an extension no reader knows is refused."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbert.data.beir import Document, beir_file
from sbert.data.lines import read_lines
from sbert.data.paths import numbered_lines, open_text
from sbert.errors import InputFileError

LINES, JSONL, CSV, TSV = "lines", "jsonl", "csv", "tsv"
_SUFFIXES = {"": LINES, ".txt": LINES, ".text": LINES, ".jsonl": JSONL, ".csv": CSV, ".tsv": TSV}
_COMPRESSIBLE = (JSONL, CSV, TSV)  # also read as .gz
_KNOWN_OTHERS = {
    ".json": "JSON, one document rather than one record per line",
    ".parquet": "Parquet",
    ".npy": "a NumPy array",
    ".xlsx": "Excel",
    ".xls": "Excel",
    ".pdf": "PDF",
    ".docx": "Word",
    ".gz": "gzip",
}
EXPECTED = (
    "expected text, one per line (.txt or no extension; '-' = standard input), JSON lines (.jsonl, .jsonl.gz) "
    "or CSV/TSV with a header row (.csv, .tsv, or .gz of them)"
)


BEIR_ID = "_id"


@dataclass(frozen=True)
class Columns:
    """Which column of a CSV/TSV header (or key of a JSON-lines record) holds each text, its id and its title.
    The text column is required; the id and title are used where the file has them (the title goes before
    the text, as in BEIR collections). With the default id column, a record without ``id`` gives its ``_id``
    (BEIR's corpus.jsonl)."""

    text: str = "text"
    id: str = "id"
    title: str = "title"


def corpus_format(source: str | Path) -> str:
    """``"lines"``, ``"jsonl"``, ``"csv"`` or ``"tsv"``, from the extension of ``source`` ('-' is lines).
    Any other extension raises ``InputFileError`` naming it."""
    if str(source) == "-":
        return LINES
    path = Path(source)
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if len(suffixes) == 2 and suffixes[1] == ".gz" and _SUFFIXES.get(suffixes[0]) in _COMPRESSIBLE:
        return _SUFFIXES[suffixes[0]]
    suffix = path.suffix.lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if path.is_dir():
        raise InputFileError(f"{path}: is a folder; {EXPECTED}")
    what = _KNOWN_OTHERS.get(suffix)
    named = f"a {suffix!r} file" + (f" ({what})" if what else "")
    raise InputFileError(f"{path}: {named} is not a format sbert reads texts from; {EXPECTED}")


def read_corpus(
    source: str | Path, *, skip_empty: bool = False, columns: Columns | None = None, unique_ids: bool = False
) -> tuple[list[str] | None, list[str]]:
    """(ids, texts) from a file, by its extension (``corpus_format``): text lines have no ids (None);
    ``.jsonl`` records and ``.csv``/``.tsv`` rows (a header row first) give the ``columns``' text, id (all
    or none) and title. Empty texts raise ``InputFileError`` naming the line, unless ``skip_empty``; so does
    an id given twice with ``unique_ids`` (an index, mined pairs, clusters: where an id names one text)."""
    columns = columns or Columns()
    fmt = corpus_format(source)
    if fmt == LINES:
        return None, read_lines(source, skip_empty=skip_empty)
    path = Path(source)
    if not path.is_file() and not path.with_name(path.name + ".gz").is_file():
        raise InputFileError(f"{path}: no such file")
    records = _jsonl_records(path) if fmt == JSONL else _table_records(path, fmt, columns)
    ids: list[str] = []
    texts: list[str] = []
    first_line: dict[str, int] = {}
    for number, record in records:
        text = _text_of(record, columns, path, number, fmt)
        if not text.strip():
            if skip_empty:
                continue
            raise InputFileError(
                f"{path}: line {number}: the {columns.text!r} {_field(fmt)} is empty; expected a non-empty text "
                "(pass skip_empty=True to skip such records)"
            )
        found = _id_of(record, columns)
        if found not in (None, ""):
            found = str(found)
            if unique_ids and first_line.setdefault(found, number) != number:
                raise InputFileError(
                    f"{path}: line {number}: id {found!r} was already given at line {first_line[found]}; "
                    "expected each record's id once"
                )
            ids.append(found)
        texts.append(text)
    if ids and len(ids) != len(texts):
        raise InputFileError(f"{path}: {len(ids)} of {len(texts)} records have an {columns.id!r}; give all or none")
    return ids or None, texts


def _id_of(record: dict, columns: Columns):
    """The record's id: its ``columns.id`` field, or BEIR's ``_id`` where the default ``id`` is absent."""
    if columns.id == Columns.id and columns.id not in record:
        return record.get(BEIR_ID)
    return record.get(columns.id)


def _field(fmt: str) -> str:
    return "field" if fmt == JSONL else "column"


def _text_of(record: dict, columns: Columns, path: Path, number: int, fmt: str) -> str:
    """The record's text, its title (if any) before it."""
    text = record.get(columns.text)
    if not isinstance(text, str):
        raise InputFileError(
            f"{path}: line {number}: expected an object with a string {columns.text!r} ({_fields(record, columns)}; "
            f"pass text_column=NAME for another {_field(fmt)})"
        )
    title = record.get(columns.title)
    if isinstance(title, str) and title.strip():
        return f"{title.strip()} {text.strip()}".strip()
    return text


def _fields(record: dict, columns: Columns) -> str:
    """What a record without a usable text field has instead, for the error that names it."""
    if columns.text in record:
        return f"its {columns.text!r} is {type(record[columns.text]).__name__}, not a string"
    if not record:
        return "it has no fields: each line must be a JSON object"
    names = list(record)
    more = f" and {len(names) - 12} more" if len(names) > 12 else ""
    return f"its fields: {', '.join(map(repr, names[:12]))}{more}"


def _jsonl_records(path: Path):
    for number, line in numbered_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputFileError(f"{path}: line {number} is not valid JSON ({err.msg})") from err
        yield number, record if isinstance(record, dict) else {}


def _table_records(path: Path, fmt: str, columns: Columns):
    """(line number, row as a dict) of a CSV/TSV file whose first row names the columns."""
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 2**31 - 1)))  # long documents
    with open_text(path) as handle:
        reader = csv.reader(handle, delimiter="," if fmt == CSV else "\t")
        try:
            header = next(reader, None)
            if header is None:
                return
            header = [name.removeprefix("\ufeff").strip() for name in header]
            if columns.text not in header:
                raise InputFileError(
                    f"{path}: the header row (line 1) has no {columns.text!r} column (columns: "
                    f"{', '.join(map(repr, header))}); expected a {fmt.upper()} file whose first row names its "
                    f"columns, one of them {columns.text!r} (pass text_column=NAME for another)"
                )
            for row in reader:
                number = reader.line_num
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(header):
                    raise InputFileError(
                        f"{path}: line {number}: {len(row)} fields; the header row has {len(header)} "
                        f"({', '.join(header)})"
                    )
                yield number, _row_record(header, row)
        except csv.Error as err:
            raise InputFileError(f"{path}: line {reader.line_num}: not valid {fmt.upper()} ({err})") from err


def _row_record(header: list[str], row: list[str]) -> dict[str, str]:
    """A row as {column: cell}. A name the header gives more than once (a tracker's export repeats "Comment"
    or "Outward issue link (Duplicate)", one column per value) holds its non-empty cells joined by newlines."""
    record: dict[str, str] = {}
    for name, cell in zip(header, row, strict=True):
        if name not in record or not record[name].strip():
            record[name] = cell
        elif cell.strip():
            record[name] += "\n" + cell
    return record


def record_fields(
    source: str | Path, field: str, *, skip_empty: bool = False, columns: Columns | None = None
) -> list[tuple[int, Any]]:
    """(line number, value of ``field`` or None) of each record of a ``.jsonl``/``.csv``/``.tsv`` corpus that
    ``read_corpus`` keeps, in order."""
    columns = columns or Columns()
    fmt = corpus_format(source)
    if fmt == LINES:
        raise InputFileError(f"{source}: text lines have no fields; expected a .jsonl, .csv or .tsv file")
    path = Path(source)
    records = _jsonl_records(path) if fmt == JSONL else _table_records(path, fmt, columns)
    kept = []
    for number, record in records:
        if skip_empty and not _text_of(record, columns, path, number, fmt).strip():
            continue
        kept.append((number, record.get(field)))
    return kept


def read_titles(
    source: str | Path, *, skip_empty: bool = False, columns: Columns | None = None
) -> list[str | None] | None:
    """Each kept record's title (``read_corpus``'s order; None where a record has none), or None when the file
    has no titles at all (text lines never do). ``read_corpus`` has already put each title before its text:
    this is for keeping it beside the text, to show it (``sbert index build``)."""
    columns = columns or Columns()
    if corpus_format(source) == LINES:
        return None
    titles = [
        value.strip() if isinstance(value, str) and value.strip() else None
        for _, value in record_fields(source, columns.title, skip_empty=skip_empty, columns=columns)
    ]
    return titles if any(t is not None for t in titles) else None


def documents_from(
    ids: Sequence[str] | None, texts: Sequence[str], titles: Sequence[str | None] | None = None
) -> list[Document]:
    """Documents from a corpus file's ``read_corpus`` ids and texts (a title put before its text) and
    ``read_titles``: the title taken back off the front of its text (ids: line order where the file has none)."""
    out = []
    for n, text in enumerate(texts):
        title = (titles[n] if titles is not None else None) or ""
        if title and text == title:  # a title without a text
            body = ""
        else:
            body = text[len(title) + 1 :] if title and text.startswith(title + " ") else text
        out.append(Document(ids[n] if ids is not None else str(n), title, body))
    return out


def corpus_file(source: str | Path) -> Path:
    """``source``, or for a BEIR folder its ``corpus.jsonl`` (or ``.gz``): the file ``read_documents`` reads."""
    path = Path(source)
    return beir_file(path, "corpus.jsonl") if path.is_dir() else path


def read_documents(source: str | Path, *, skip_empty: bool = False, columns: Columns | None = None) -> list[Document]:
    """The corpus ``source`` (a file, or a BEIR folder: ``corpus_file``) as ``Document``s (id, title, text), read
    as ``sbert index build`` reads it (``read_corpus``, ids unique, and ``read_titles``): what ``sbert adapt``
    trains on and ``--auto`` draws its pseudo-queries from are then the same documents, in the same order, with
    the same ids."""
    path = corpus_file(source)
    ids, texts = read_corpus(path, skip_empty=skip_empty, columns=columns, unique_ids=True)
    return documents_from(ids, texts, read_titles(path, skip_empty=skip_empty, columns=columns))


def read_adapt_documents(source: str | Path, columns: Columns | None = None) -> tuple[list[Document], Path]:
    """(the documents, the file they came from); refuses an empty corpus naming the file.

    ``source``: a BEIR folder (its ``corpus.jsonl[.gz]``) or a corpus file as ``sbert index build`` reads it
    (``sbert.data.corpus.read_documents``: JSON lines, CSV/TSV with a header row, whose ``columns`` hold the
    text, title and id; or one text per line, without titles). Empty records are skipped; an id given twice is
    refused naming both lines. So the documents ``--hold-out`` leaves out are those ``--auto`` draws from.
    """
    path = corpus_file(source)
    if not path.exists():
        raise InputFileError(
            f"{path}: no such file (expected a corpus: a BEIR folder, or a .jsonl[.gz], .csv, .tsv or text file)"
        )
    documents = read_documents(path, skip_empty=True, columns=columns)
    if not documents:
        raise InputFileError(f"{path}: the corpus holds no documents; adapt needs the collection's texts")
    return documents, path
