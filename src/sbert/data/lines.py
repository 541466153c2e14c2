"""One text per line: the input format of ``sbert encode``."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from sbert.data.paths import not_decodable
from sbert.errors import InputFileError


def read_lines(source: str | Path | BinaryIO, *, skip_empty: bool = False) -> list[str]:
    """Read UTF-8 lines from a path, or from a binary stream ('-' means standard input).

    Line ends (LF or CRLF) are removed. A byte sequence that is not UTF-8 raises ``InputFileError``
    with the file name, the line number and the byte offset; an empty line raises too unless
    ``skip_empty``.
    """
    if source == "-":
        name, stream, close = "<stdin>", sys.stdin.buffer, False
    elif isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            raise InputFileError(f"{path}: is a folder; expected a text file with one text per line")
        if not path.is_file():
            raise InputFileError(f"{path}: no such file")
        name, stream, close = str(path), open(path, "rb"), True  # noqa: SIM115 - closed below
    else:
        name, stream, close = getattr(source, "name", "<stream>"), source, False
    try:
        return list(iter_lines(name, stream, skip_empty))
    finally:
        if close:
            stream.close()


def iter_lines(name: str, stream: Iterable[bytes], skip_empty: bool = False) -> Iterator[str]:
    """The texts of a binary ``stream`` of UTF-8 lines named ``name`` in errors, one at a time (the rules of
    ``read_lines``: line ends and a first byte-order mark removed, empty lines refused unless ``skip_empty``)."""
    for number, text in numbered_texts(name, stream):
        if not text.strip():
            if skip_empty:
                continue
            raise empty_line(name, number)
        yield text


def numbered_texts(name: str, stream: Iterable[bytes]) -> Iterator[tuple[int, str]]:
    """(line number from 1, text) of every line of a binary ``stream`` of UTF-8 lines, empty ones too: line
    ends and a first byte-order mark removed; bad bytes raise ``InputFileError`` naming ``name`` and the line."""
    for number, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise not_decodable(name, number, raw, err) from err
        text = text.rstrip("\r\n")
        yield number, text.removeprefix("\ufeff") if number == 1 else text


def empty_line(name: str, number: int) -> InputFileError:
    """The error for an empty line of a file of one text per line."""
    return InputFileError(
        f"{name}: line {number} is empty; expected one text per line (use --skip-empty to skip empty lines)"
    )
