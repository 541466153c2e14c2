"""Corpora for encoding, indexing, mining, clustering and maps: plain text (one per line), JSON lines, or CSV/TSV
with a header row. The format follows the file's extension (``CORPUS_FORMATS``, the one table of formats: their
extensions, what each is and its reader; help texts and errors are written from it); an extension no reader knows
is refused.

A corpus is read once (``read_corpus``) into its ids, titles and texts, kept apart; a title goes before its text
only where the two are embedded (``Corpus.joined``, ``sbert.data.beir.joined``).

Adding a format: a reader here (a function of (path, ``Columns``) giving (line number, record) pairs) and one
entry in ``CORPUS_FORMATS``.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from sbert.data.beir import Document, beir_file, joined
from sbert.data.lines import empty_line, numbered_texts
from sbert.data.paths import numbered_lines, open_text
from sbert.errors import InputFileError

LINES, JSONL, CSV, TSV = "lines", "jsonl", "csv", "tsv"
Records = Iterator[tuple[int, dict[str, Any]]]  # (line number, record: field -> value)
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
BEIR_ID = "_id"


@dataclass(frozen=True)
class Columns:
    """Which column of a CSV/TSV header (or key of a JSON-lines record) holds each text, its id and its title.
    The text column is required; the id and title are used where the file has them (the title goes before
    the text where it is embedded, as in BEIR collections). With the default id column, a record without
    ``id`` gives its ``_id`` (BEIR's corpus.jsonl)."""

    text: str = "text"
    id: str = "id"
    title: str = "title"


@dataclass(frozen=True)
class CorpusFormat:
    """A corpus format: its ``name``, file ``extensions`` (lower case; "" for a file without one), ``what`` it
    is (for help texts and errors), its reader, whether a ``.gz`` of it is read too, whether its records have
    named ``fields`` (text, id, title; text lines have none) and a ``note`` shown with its extensions."""

    name: str
    extensions: tuple[str, ...]
    what: str
    read: Callable[[Path | str, Columns], Records]
    gzip: bool = True
    fields: bool = True
    note: str = ""

    def shown(self) -> str:
        """Its extensions as help texts show them: ``.jsonl, .jsonl.gz``."""
        named = [e for e in self.extensions if e]
        named += [f"{e}.gz" for e in named] if self.gzip else []
        listed = ", ".join(named) + (" or no extension" if "" in self.extensions else "")
        return listed + (f"; {self.note}" if self.note else "")


class CorpusRecord(NamedTuple):
    """One record of a corpus as ``iter_corpus`` gives it: its ``line``, ``id`` and ``title`` (None where it
    has none) and its ``text``, as the file holds them."""

    line: int
    id: str | None
    title: str | None
    text: str


@dataclass(frozen=True)
class Corpus:
    """A corpus file read once (``read_corpus``): each kept record's ``texts`` (as the file holds them),
    ``ids`` (None where the file has none) and ``titles`` (None where a record has none; None altogether where
    no record has one)."""

    texts: list[str]
    ids: list[str] | None = None
    titles: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def joined(self) -> list[str]:
        """Each text as it is embedded: its title, if any, before it (``sbert.data.beir.joined``)."""
        if self.titles is None:
            return list(self.texts)
        return [joined(title, text) for title, text in zip(self.titles, self.texts, strict=True)]

    def documents(self) -> list[Document]:
        """The records as ``Document``s (id, title, text); ids are line order where the file has none."""
        ids = self.ids if self.ids is not None else [str(n) for n in range(len(self))]
        titles = self.titles if self.titles is not None else [None] * len(self)
        return [Document(i, t or "", x) for i, t, x in zip(ids, titles, self.texts, strict=True)]


def corpus_format(source: str | Path) -> str:
    """The name of the ``CORPUS_FORMATS`` entry that reads ``source``, by its extension ('-' is lines).
    Any other extension raises ``InputFileError`` naming it."""
    if str(source) == "-":
        return LINES
    path = Path(source)
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if len(suffixes) == 2 and suffixes[1] == ".gz":
        fmt = _by_extension().get(suffixes[0])
        if fmt is not None and fmt.gzip:
            return fmt.name
    fmt = _by_extension().get(path.suffix.lower())
    if fmt is not None:
        return fmt.name
    if path.is_dir():
        raise InputFileError(f"{path}: is a folder; expected {formats_help()}")
    what = _KNOWN_OTHERS.get(path.suffix.lower())
    named = f"a {path.suffix.lower()!r} file" + (f" ({what})" if what else "")
    raise InputFileError(f"{path}: {named} is not a format sbert reads texts from; expected {formats_help()}")


def _by_extension() -> dict[str, CorpusFormat]:
    return {extension: fmt for fmt in CORPUS_FORMATS.values() for extension in fmt.extensions}


def formats_help() -> str:
    """Every corpus format with its extensions, for help texts and errors: ``text, one per line (...), ...``."""
    shown = [f"{fmt.what} ({fmt.shown()})" for fmt in CORPUS_FORMATS.values()]
    return ", ".join(shown[:-1]) + f" or {shown[-1]}" if len(shown) > 1 else shown[0]


def field_extensions() -> str:
    """The extensions of the formats whose records have fields (text, id, title): ``.jsonl, .csv or .tsv``."""
    named = [fmt.extensions[0] for fmt in CORPUS_FORMATS.values() if fmt.fields]
    return ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else named[0]


def read_corpus(
    source: str | Path, *, skip_empty: bool = False, columns: Columns | None = None, unique_ids: bool = False
) -> Corpus:
    """The ``Corpus`` (ids, titles, texts) in a file, by its extension (``corpus_format``): text lines have no
    ids or titles; ``.jsonl`` records and ``.csv``/``.tsv`` rows (a header row first) give the ``columns``'
    text, id (all or none) and title. Empty records (no text, no title) raise ``InputFileError`` naming the
    line, unless ``skip_empty``; so does an id given twice with ``unique_ids`` (an index, mined pairs,
    clusters: where an id names one text)."""
    columns = columns or Columns()
    ids: list[str] = []
    titles: list[str | None] = []
    texts: list[str] = []
    first_line: dict[str, int] = {}
    for record in iter_corpus(source, skip_empty=skip_empty, columns=columns):
        if record.id is not None:
            if unique_ids and first_line.setdefault(record.id, record.line) != record.line:
                raise InputFileError(
                    f"{source}: line {record.line}: id {record.id!r} was already given at line "
                    f"{first_line[record.id]}; expected each record's id once"
                )
            ids.append(record.id)
        titles.append(record.title)
        texts.append(record.text)
    if ids and len(ids) != len(texts):
        raise InputFileError(f"{source}: {len(ids)} of {len(texts)} records have an {columns.id!r}; give all or none")
    return Corpus(texts, ids or None, titles if any(t is not None for t in titles) else None)


def iter_corpus(
    source: str | Path, *, skip_empty: bool = False, columns: Columns | None = None
) -> Iterator[CorpusRecord]:
    """The records of a corpus file one at a time (``read_corpus``'s rules, but ids unchecked), for reading
    what is too large to hold whole."""
    columns = columns or Columns()
    fmt = CORPUS_FORMATS[corpus_format(source)]
    if fmt.fields:
        path = Path(source)
        if not path.is_file() and not path.with_name(path.name + ".gz").is_file():
            raise InputFileError(f"{path}: no such file")
    for number, record in fmt.read(source, columns):
        text = _text_of(record, columns, source, number, fmt.name)
        title = _title_of(record, columns)
        if not joined(title, text).strip():
            if skip_empty:
                continue
            if not fmt.fields:
                raise empty_line(str(source), number)
            raise InputFileError(
                f"{source}: line {number}: the {columns.text!r} {_field(fmt.name)} is empty; expected a non-empty "
                "text (pass skip_empty=True to skip such records)"
            )
        found = _id_of(record, columns)
        yield CorpusRecord(number, None if found in (None, "") else str(found), title, text)


def _title_of(record: dict, columns: Columns) -> str | None:
    """The record's title, stripped; None where it has none (or an empty one)."""
    title = record.get(columns.title)
    return title.strip() if isinstance(title, str) and title.strip() else None


def _id_of(record: dict, columns: Columns):
    """The record's id: its ``columns.id`` field, or BEIR's ``_id`` where the default ``id`` is absent."""
    if columns.id == Columns.id and columns.id not in record:
        return record.get(BEIR_ID)
    return record.get(columns.id)


def _field(fmt: str) -> str:
    return "field" if fmt == JSONL else "column"


def _text_of(record: dict, columns: Columns, path: Path | str, number: int, fmt: str) -> str:
    """The record's text (its ``columns.text``), as the file holds it."""
    text = record.get(columns.text)
    if not isinstance(text, str):
        raise InputFileError(
            f"{path}: line {number}: expected an object with a string {columns.text!r} ({_fields(record, columns)}; "
            f"pass text_column=NAME for another {_field(fmt)})"
        )
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


def _line_records(source: Path | str, columns: Columns) -> Records:
    """(line number, {text column: line}) of each line of a text file ('-' = standard input), empty ones too."""
    if str(source) == "-":
        for number, text in numbered_texts("<stdin>", sys.stdin.buffer):
            yield number, {columns.text: text}
        return
    path = Path(source)
    if path.is_dir():
        raise InputFileError(f"{path}: is a folder; expected a text file with one text per line")
    if not path.is_file():
        raise InputFileError(f"{path}: no such file")
    with open(path, "rb") as stream:
        for number, text in numbered_texts(str(path), stream):
            yield number, {columns.text: text}


def _jsonl_records(path: Path | str, columns: Columns) -> Records:
    """(line number, object) of each non-blank line of a JSON-lines file (``.gz`` too)."""
    for number, line in numbered_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputFileError(f"{path}: line {number} is not valid JSON ({err.msg})") from err
        yield number, record if isinstance(record, dict) else {}


def _csv_records(path: Path | str, columns: Columns) -> Records:
    return _table_records(Path(path), CSV, columns)


def _tsv_records(path: Path | str, columns: Columns) -> Records:
    return _table_records(Path(path), TSV, columns)


def _table_records(path: Path, fmt: str, columns: Columns) -> Records:
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
    """(line number, value of ``field`` or None) of each record of a corpus whose records have fields
    (``.jsonl``/``.csv``/``.tsv``) that ``read_corpus`` keeps, in order."""
    columns = columns or Columns()
    fmt = CORPUS_FORMATS[corpus_format(source)]
    if not fmt.fields:
        raise InputFileError(f"{source}: text lines have no fields; expected a {field_extensions()} file")
    path = Path(source)
    kept = []
    for number, record in fmt.read(path, columns):
        text = _text_of(record, columns, path, number, fmt.name)
        if skip_empty and not joined(_title_of(record, columns), text).strip():
            continue
        kept.append((number, record.get(field)))
    return kept


def corpus_file(source: str | Path) -> Path:
    """``source``, or for a BEIR folder its ``corpus.jsonl`` (or ``.gz``): the file ``read_corpus_documents``
    reads."""
    path = Path(source)
    return beir_file(path, "corpus.jsonl") if path.is_dir() else path


def read_corpus_documents(source: str | Path, columns: Columns | None = None) -> tuple[list[Document], Path]:
    """(the documents, the file they came from) of a corpus as ``sbert index build`` reads it (``read_corpus``,
    ids unique, empty records skipped), as ``Document``s: what ``sbert adapt`` trains on and ``--auto`` draws
    its pseudo-queries from are then the same documents, in the same order, with the same ids. Refuses an empty
    corpus naming the file.

    ``source``: a BEIR folder (its ``corpus.jsonl[.gz]``) or a corpus file (``CORPUS_FORMATS``; the ``columns``
    of a file with fields hold the text, title and id; text lines have no titles). An id given twice is refused
    naming both lines. So the documents ``--hold-out`` leaves out are those ``--auto`` draws from.
    """
    path = corpus_file(source)
    if not path.exists():
        raise InputFileError(f"{path}: no such file (expected a corpus: a BEIR folder, or {formats_help()})")
    documents = read_corpus(path, skip_empty=True, columns=columns, unique_ids=True).documents()
    if not documents:
        raise InputFileError(f"{path}: the corpus holds no documents; adapt needs the collection's texts")
    return documents, path


CORPUS_FORMATS: dict[str, CorpusFormat] = {
    fmt.name: fmt
    for fmt in (
        CorpusFormat(
            LINES, ("", ".txt", ".text"), "text, one per line", _line_records, False, False, "'-' = standard input"
        ),
        CorpusFormat(JSONL, (".jsonl",), "JSON lines", _jsonl_records),
        CorpusFormat(CSV, (".csv",), "CSV with a header row", _csv_records),
        CorpusFormat(TSV, (".tsv",), "TSV with a header row", _tsv_records),
    )
}
