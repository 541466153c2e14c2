"""The documents ``sbert adapt`` learns from: a BEIR corpus, a folder holding one, JSON lines or plain text."""

from __future__ import annotations

from pathlib import Path

from sbert.data.beir import Document, beir_file, read_documents
from sbert.errors import InputFileError


def read_adapt_documents(source: str | Path) -> tuple[list[Document], Path]:
    """(the documents, the file they came from); refuses an empty corpus naming the file.

    ``source``: a BEIR folder (its ``corpus.jsonl[.gz]``), a BEIR-style ``.jsonl[.gz]`` (``_id``/``id``,
    ``text``, optional ``title``) or a plain-text file of one document per line (no titles).
    """
    path = Path(source)
    if path.is_dir():
        path = beir_file(path, "corpus.jsonl")
    if not path.exists():
        raise InputFileError(f"{path}: no such file (expected a corpus: a BEIR folder, .jsonl[.gz] or text file)")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        documents = list(_jsonl_documents(path))
    else:
        from sbert.data.lines import read_lines

        documents = [Document(str(i), "", text) for i, text in enumerate(read_lines(path, skip_empty=True))]
    if not documents:
        raise InputFileError(f"{path}: the corpus holds no documents; adapt needs the collection's texts")
    return documents, path


def _jsonl_documents(path: Path) -> list[Document]:
    """BEIR's reader (duplicate ids refused) where records carry ``_id``; else ``id``/``title``/``text``."""
    import json

    from sbert.data.paths import numbered_lines

    documents = []
    for number, line in numbered_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputFileError(f"{path}: line {number} is not valid JSON ({err.msg})") from err
        if isinstance(record, dict) and "_id" in record:
            return list(read_documents(path, skip_empty=True)[0].values())
        title, text = (record.get("title") or "", record.get("text")) if isinstance(record, dict) else ("", None)
        if not isinstance(text, str) or not isinstance(title, str):
            raise InputFileError(f'{path}: line {number}: expected an object with a string "text" (and "title")')
        document = Document(str(record.get("id", number)), title, text)
        if document.joined():
            documents.append(document)
    return documents
