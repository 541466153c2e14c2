"""Retrieval collections in BEIR layout: a corpus, queries and relevance judgments (qrels) per split.

A BEIR folder holds ``corpus.jsonl`` (``{"_id", "title", "text"}`` per line), ``queries.jsonl``
(``{"_id", "text"}``) and ``qrels/<split>.tsv`` (a header ``query-id corpus-id score``, then one
judgment per line); each file may be gzipped (``.gz``). ``read_beir(folder, split)`` reads one split
into a ``RetrievalCollection``; every error names the file and the line at fault.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sbert.data.paths import numbered_lines, open_text
from sbert.errors import InputFileError

LAYOUT = "a BEIR folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv (each may be .gz)"
QRELS_HEADER = ("query-id", "corpus-id", "score")


@dataclass(frozen=True)
class Document:
    """One corpus entry: its id, title (may be empty) and body text."""

    id: str
    title: str
    text: str

    def joined(self, separator: str = " ") -> str:
        """The text to embed: its title before its text (``joined``)."""
        return joined(self.title, self.text, separator)


def joined(title: str | None, text: str, separator: str = " ") -> str:
    """A document's text as it is embedded (and searched): ``title + separator + text``, both stripped, where
    it has a title; else ``text`` as it is. The one place a title and its text are put together."""
    if title is None or not title.strip():
        return text
    return f"{title.strip()}{separator}{text.strip()}".strip()


@dataclass
class RetrievalCollection:
    """One split of a BEIR collection.

    ``corpus``: id -> Document, in file order. ``queries``: id -> text, only the queries judged in the
    split, in file order. ``qrels``: query id -> {document id: relevance}; a relevance above 0 means
    relevant (BEIR's convention), 0 or below means judged not relevant. ``skipped_documents``: empty
    documents dropped by ``skip_empty_documents`` (with ``skipped_judgments`` that pointed at them).
    """

    name: str
    split: str
    corpus: dict[str, Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    skipped_documents: int = 0
    skipped_judgments: int = 0
    source: Path | None = field(default=None, compare=False)

    def relevant(self, query_id: str) -> set[str]:
        """The ids of the documents judged relevant (relevance > 0) to ``query_id``."""
        return {doc for doc, score in self.qrels.get(query_id, {}).items() if score > 0}

    def document_texts(self, separator: str = " ") -> dict[str, str]:
        """id -> the text to embed (``Document.joined``), in corpus order."""
        return {doc_id: doc.joined(separator) for doc_id, doc in self.corpus.items()}


def beir_file(folder: Path, name: str) -> Path:
    """``folder/name``, or ``folder/name.gz`` when only that exists; a missing file names what a BEIR folder holds."""
    for path in (folder / name, folder / f"{name}.gz"):
        if path.is_file():
            return path
    raise InputFileError(f"{folder / name}: no such file (nor .gz); expected {LAYOUT}")


def splits(folder: str | Path) -> list[str]:
    """The splits a BEIR folder has judgments for (``qrels/<split>.tsv[.gz]``), sorted."""
    qrels = Path(folder) / "qrels"
    names = {p.name.removesuffix(".gz").removesuffix(".tsv") for p in qrels.glob("*.tsv*")} if qrels.is_dir() else set()
    return sorted(names)


def _records(path: Path, what: str) -> Iterator[tuple[int, str, dict]]:
    """(line number, id, object) for each non-blank line of a JSON-lines file; ids are kept as strings."""
    for number, line in numbered_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputFileError(f"{path}: line {number} is not valid JSON ({err.msg}); expected {what}") from None
        if not isinstance(record, dict) or not isinstance(record.get("_id"), (str, int)):
            raise InputFileError(f'{path}: line {number} lacks a string "_id"; expected {what}')
        doc_id = str(record["_id"])
        if not doc_id.strip():
            raise InputFileError(f'{path}: line {number}: "_id" is empty; expected {what}')
        yield number, doc_id, record


def _string(record: dict, key: str, path: Path, number: int, what: str, required: bool) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise InputFileError(f'{path}: line {number}: "{key}" is {type(value).__name__}, not a string; expected {what}')
    return value


def read_beir_documents(path: str | Path, skip_empty: bool = False) -> tuple[dict[str, Document], list[str]]:
    """(id -> Document, ids of empty documents skipped) from a BEIR ``corpus.jsonl[.gz]``.

    A duplicate id, or a document whose title and text are both empty (unless ``skip_empty``), raises
    ``InputFileError`` naming the line.
    """
    path, what = Path(path), 'one JSON object per line with "_id", "text" and optionally "title"'
    corpus: dict[str, Document] = {}
    lines: dict[str, int] = {}
    skipped: list[str] = []
    for number, doc_id, record in _records(path, what):
        if doc_id in lines:
            raise InputFileError(
                f"{path}: line {number}: duplicate document id {doc_id!r} (first on line {lines[doc_id]})"
            )
        lines[doc_id] = number
        title = _string(record, "title", path, number, what, False)
        document = Document(doc_id, title, _string(record, "text", path, number, what, True))
        if not document.joined().strip():
            if not skip_empty:
                raise InputFileError(
                    f"{path}: line {number}: document {doc_id!r} is empty (no title, no text); "
                    "pass skip_empty_documents=True to drop empty documents"
                )
            skipped.append(doc_id)
            continue
        corpus[doc_id] = document
    return corpus, skipped


def read_queries(path: str | Path, wanted: set[str] | None = None) -> dict[str, str]:
    """id -> text from a BEIR ``queries.jsonl[.gz]``, only the ids in ``wanted`` (all when None).

    Every line is checked (JSON, ``_id``, string ``text``, no duplicate id); a wanted query whose text is
    empty raises ``InputFileError``.
    """
    path, what = Path(path), 'one JSON object per line with "_id" and "text"'
    queries: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, query_id, record in _records(path, what):
        if query_id in lines:
            raise InputFileError(
                f"{path}: line {number}: duplicate query id {query_id!r} (first on line {lines[query_id]})"
            )
        lines[query_id] = number
        text = _string(record, "text", path, number, what, True)
        if wanted is None or query_id in wanted:
            if not text.strip():
                raise InputFileError(f"{path}: line {number}: query {query_id!r} is empty; expected a query text")
            queries[query_id] = text
    return queries


def _qrel_line(line: str, path: Path, number: int) -> tuple[str, str, int]:
    cols = line.rstrip("\r\n").split("\t")
    if len(cols) != 3 or not cols[0].strip() or not cols[1].strip():
        raise InputFileError(
            f"{path}: line {number} has {len(cols)} tab-separated columns; expected query-id, corpus-id, score"
        )
    try:
        score = int(cols[2])
    except ValueError:
        raise InputFileError(f"{path}: line {number}: score {cols[2]!r} is not an integer") from None
    return cols[0].strip(), cols[1].strip(), score


def read_qrels(path: str | Path) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """(query id -> {document id: relevance}, query id -> line of its first judgment) from a qrels TSV.

    The header row ``query-id corpus-id score`` is optional. A malformed line or a pair judged twice
    raises ``InputFileError`` naming the line.
    """
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    first_line: dict[str, int] = {}
    seen: dict[tuple[str, str], int] = {}
    for number, line in numbered_lines(path):
        if number == 1 and tuple(c.strip().lower() for c in line.split("\t")) == QRELS_HEADER:
            continue
        query_id, doc_id, score = _qrel_line(line, path, number)
        if (query_id, doc_id) in seen:
            raise InputFileError(
                f"{path}: line {number}: query {query_id!r} and document {doc_id!r} are judged twice "
                f"(first on line {seen[query_id, doc_id]})"
            )
        seen[query_id, doc_id] = number
        qrels.setdefault(query_id, {})[doc_id] = score
        first_line.setdefault(query_id, number)
    return qrels, first_line


def _check_documents(qrels: dict[str, dict[str, int]], corpus: dict, skipped: set[str], path: Path) -> int:
    """Drop judgments of skipped (empty) documents, returning how many; one of an unknown document raises."""
    dropped = 0
    for query_id, judged in qrels.items():
        for doc_id in list(judged):
            if doc_id in corpus:
                continue
            if doc_id not in skipped:
                raise InputFileError(
                    f"{path}: line {_line_of(path, query_id, doc_id)}: document {doc_id!r} (judged for query "
                    f"{query_id!r}) is not in the corpus"
                )
            del judged[doc_id]
            dropped += 1
    return dropped


def _line_of(path: Path, query_id: str, doc_id: str) -> int:
    """The line of ``path`` that judges (query_id, doc_id): read again only to name it in an error."""
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            cols = [c.strip() for c in line.rstrip("\r\n").split("\t")]
            if cols[:2] == [query_id, doc_id]:
                return number
    return 0


def read_beir(folder: str | Path, split: str = "test", skip_empty_documents: bool = False) -> RetrievalCollection:
    """Read one split of a BEIR-layout folder (plain or ``.gz`` files) into a ``RetrievalCollection``.

    Judgments must point at documents in the corpus and queries in the queries file. A document with
    neither title nor text is refused unless ``skip_empty_documents``, which drops it (and the judgments
    that point at it) with a warning saying how many. Raises ``InputFileError`` naming file and line.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputFileError(f"{folder}: no such folder; expected {LAYOUT}")
    try:
        qrels_path = beir_file(folder / "qrels", f"{split}.tsv")
    except InputFileError as err:
        have = ", ".join(splits(folder)) or "none"
        raise InputFileError(f"{err} (splits with judgments here: {have})") from None
    corpus, skipped = read_beir_documents(beir_file(folder, "corpus.jsonl"), skip_empty_documents)
    qrels, first_line = read_qrels(qrels_path)
    dropped = _check_documents(qrels, corpus, set(skipped), qrels_path)
    queries_path = beir_file(folder, "queries.jsonl")
    queries = read_queries(queries_path, set(qrels))
    for query_id, number in first_line.items():
        if query_id not in queries:
            raise InputFileError(f"{qrels_path}: line {number}: query {query_id!r} is not in {queries_path.name}")
    if skipped:
        warnings.warn(
            f"{folder}: skipped {len(skipped)} empty documents and {dropped} judgments pointing at them",
            stacklevel=2,
        )
    return RetrievalCollection(folder.name, split, corpus, queries, qrels, len(skipped), dropped, folder)
