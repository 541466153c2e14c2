"""Streaming input for sharded encoding: texts read one at a time and cut into numbered chunks."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbert.data.lines import iter_lines
from sbert.errors import InputFileError


@dataclass(frozen=True)
class Chunk:
    """Shard ``index`` of the input: rows ``start`` .. ``start + len(texts) - 1`` (0-based input positions)."""

    index: int
    start: int
    texts: list[str]

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


def iter_file_lines(source: str | Path, *, skip_empty: bool = False) -> Iterator[str]:
    """UTF-8 lines of a file ('-' = standard input), one at a time, without their line ends.

    Bad bytes and empty lines (unless ``skip_empty``) raise ``InputFileError`` naming the file and line."""
    if str(source) == "-":
        yield from iter_lines("<stdin>", sys.stdin.buffer, skip_empty)
        return
    path = Path(source)
    if path.is_dir():
        raise InputFileError(f"{path}: is a folder; expected a text file with one text per line")
    if not path.is_file():
        raise InputFileError(f"{path}: no such file")
    with open(path, "rb") as stream:
        yield from iter_lines(str(path), stream, skip_empty)


def iter_texts(source: str | Path | Iterable[str], *, skip_empty: bool = False) -> Iterator[str]:
    """Texts from a file path ('-' = stdin) or from an iterable of strings (checked one by one)."""
    if isinstance(source, (str, Path)):
        yield from iter_file_lines(source, skip_empty=skip_empty)
        return
    for number, text in enumerate(source, start=1):
        if not isinstance(text, str):
            raise TypeError(f"item {number} of the input is a {type(text).__name__}; expected a str")
        if not text.strip():
            if skip_empty:
                continue
            raise InputFileError(f"item {number} of the input is empty; expected a non-empty text")
        yield text


def chunks(texts: Iterable[str], size: int) -> Iterator[Chunk]:
    """Consecutive chunks of ``size`` texts (the last may be shorter); only one chunk is held at a time."""
    if size < 1:
        raise ValueError(f"shard_size must be at least 1, got {size}")
    batch: list[str] = []
    index = start = 0
    for text in texts:
        batch.append(text)
        if len(batch) == size:
            yield Chunk(index, start, batch)
            index, start, batch = index + 1, start + size, []
    if batch:
        yield Chunk(index, start, batch)
