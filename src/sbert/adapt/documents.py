"""The documents ``sbert adapt`` learns from: a BEIR folder, or a corpus file read as ``sbert index build`` reads it."""

from __future__ import annotations

from pathlib import Path

from sbert.data.beir import Document
from sbert.data.corpus import Columns, corpus_file, read_documents
from sbert.errors import InputFileError


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
