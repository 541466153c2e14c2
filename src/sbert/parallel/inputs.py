"""Streaming input for sharded encoding: texts read one at a time (a corpus file in any of
``sbert.data.corpus.CORPUS_FORMATS``, its ids kept where it has them, or an iterable of str) and cut into
numbered chunks."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbert.data.beir import joined
from sbert.data.corpus import Columns, iter_corpus
from sbert.errors import InputFileError

Item = str | tuple[str | None, str]  # a text, or (its id or None, the text)


@dataclass(frozen=True)
class Chunk:
    """Shard ``index`` of the input: rows ``start`` .. ``start + len(texts) - 1`` (0-based input positions);
    ``ids``: each row's id in the corpus, where the input has ids (else None)."""

    index: int
    start: int
    texts: list[str]
    ids: list[str] | None = None

    @property
    def digest(self) -> str:
        """sha256 of the texts: tells on resume whether the input of a finished shard has changed."""
        return texts_digest(self.texts)


def texts_digest(texts: Iterable[str]) -> str:
    """sha256 of ``texts``, each followed by a NUL byte (what a shard's ``texts_sha256`` records)."""
    sha = hashlib.sha256()
    for text in texts:
        sha.update(text.encode("utf-8", "surrogatepass"))
        sha.update(b"\0")
    return sha.hexdigest()


def input_fingerprint(source: str | Path | Iterable[str]) -> dict[str, Any] | None:
    """What a shard folder records of its input, so that a resume from another input is refused up front: a
    file's absolute path, size and sha256 (read once, in blocks). Standard input and iterables have none
    (None): for them each shard's texts are checked as the run reaches it."""
    if not isinstance(source, (str, Path)) or str(source) == "-":
        return None
    path = Path(source)
    sha, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as stream:
            while block := stream.read(1 << 20):
                sha.update(block)
                size += len(block)
    except OSError as err:
        raise InputFileError(f"{path}: cannot be read ({err})") from err
    return {"path": str(path.resolve()), "bytes": size, "sha256": sha.hexdigest()}


def iter_texts(
    source: str | Path | Iterable[str], *, skip_empty: bool = False, columns: Columns | None = None
) -> Iterator[Item]:
    """The input one text at a time: a corpus file ('-' = standard input; any of ``CORPUS_FORMATS``, each text
    as it is embedded: its title before it) as (id or None, text), or the strings of an iterable, checked one
    by one. A file's records give ids all or none (``read_corpus``'s rule, checked as they come)."""
    if isinstance(source, (str, Path)):
        yield from _file_texts(source, skip_empty, columns)
        return
    for number, text in enumerate(source, start=1):
        if not isinstance(text, str):
            raise TypeError(f"item {number} of the input is a {type(text).__name__}; expected a str")
        if not text.strip():
            if skip_empty:
                continue
            raise InputFileError(f"item {number} of the input is empty; expected a non-empty text")
        yield text


def _file_texts(source: str | Path, skip_empty: bool, columns: Columns | None) -> Iterator[Item]:
    """(id or None, text as embedded) of each record of a corpus file, refusing ids given to some records only."""
    with_ids: bool | None = None
    for record in iter_corpus(source, skip_empty=skip_empty, columns=columns):
        if with_ids is None:
            with_ids = record.id is not None
        elif with_ids != (record.id is not None):
            raise InputFileError(
                f"{source}: line {record.line}: {'no' if with_ids else 'an'} id, unlike the records before it; "
                "give every record an id, or none"
            )
        yield record.id, joined(record.title, record.text)


def chunks(items: Iterable[Item], size: int) -> Iterator[Chunk]:
    """Consecutive chunks of ``size`` texts (the last may be shorter); only one chunk is held at a time.
    ``items``: texts, or (id or None, text) pairs (``iter_texts``)."""
    if size < 1:
        raise ValueError(f"shard_size must be at least 1, got {size}")
    batch: list[str] = []
    ids: list[str] = []
    index = start = 0
    for item in items:
        found, text = (None, item) if isinstance(item, str) else item
        batch.append(text)
        if found is not None:
            ids.append(found)
        if len(batch) == size:
            yield Chunk(index, start, batch, ids or None)
            index, start, batch, ids = index + 1, start + size, [], []
    if batch:
        yield Chunk(index, start, batch, ids or None)
