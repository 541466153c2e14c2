"""Where the evaluation and training data live: ``--data``, else ``$SBERT_DATA``, else ``../shared/data``."""

from __future__ import annotations

import contextlib
import gzip
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from sbert.errors import InputFileError

_REPO_ROOT = Path(__file__).resolve().parents[3]  # src/sbert/data/paths.py -> repository root


def data_dir(option: str | Path | None = None) -> Path:
    """The data folder: the given option, ``$SBERT_DATA``, or ``../shared/data`` beside the repository."""
    if option is not None:
        chosen, why = Path(option), "the data option"
    elif os.environ.get("SBERT_DATA"):
        chosen, why = Path(os.environ["SBERT_DATA"]), "$SBERT_DATA"
    else:
        for candidate in (_REPO_ROOT.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"):
            if candidate.is_dir():
                return candidate
        chosen, why = _REPO_ROOT.parent / "shared" / "data", "the default location"
    if not chosen.is_dir():
        raise InputFileError(f"{chosen}: data folder not found (from {why}); set SBERT_DATA or pass the folder")
    return chosen


def not_decodable(
    name: str, number: int, raw: bytes, err: UnicodeDecodeError, encoding: str = "utf-8"
) -> InputFileError:
    """The error for line ``number`` of ``name`` (its bytes ``raw``) that is not text in ``encoding``."""
    label = "UTF-8" if encoding.lower().replace("_", "-").startswith("utf-8") else encoding
    return InputFileError(
        f"{name}: line {number} is not valid {label} (byte {err.start} of the line: "
        f"{raw[err.start : err.start + 4]!r}); expected {label} text"
    )


def _open_binary(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _locate_undecodable(path: Path, encoding: str) -> InputFileError | None:
    """Find the first line of ``path`` that does not decode (lines split on LF, as every reader here)."""
    with _open_binary(path) as stream:
        for number, raw in enumerate(stream, start=1):
            try:
                raw.decode(encoding)
            except UnicodeDecodeError as err:
                return not_decodable(str(path), number, raw, err, encoding)
    return None


class TextFile:
    """A text file open for reading (iteration, ``readline``, ``read``) whose errors name the file:
    a byte sequence that is not ``encoding`` gives the line and the byte, a damaged ``.gz`` says so."""

    def __init__(self, path: Path, encoding: str, newline: str | None) -> None:
        self.path, self.name, self.encoding = path, str(path), encoding
        opener = gzip.open if path.suffix == ".gz" else open
        self._handle: IO[str] = opener(path, "rt", encoding=encoding, newline=newline)  # closed in close()

    @contextlib.contextmanager
    def _explained(self) -> Iterator[None]:
        try:
            yield
        except UnicodeDecodeError as err:
            located = _locate_undecodable(self.path, self.encoding)
            raise located or InputFileError(f"{self.path}: not valid {self.encoding} text ({err.reason})") from err
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise InputFileError(f"{self.path}: damaged or truncated gzip file ({err})") from err

    def __iter__(self) -> Iterator[str]:
        with self._explained():
            yield from self._handle

    def readline(self) -> str:
        with self._explained():
            return self._handle.readline()

    def read(self) -> str:
        with self._explained():
            return self._handle.read()

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> TextFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_text(path: str | Path, encoding: str = "utf-8", newline: str | None = "") -> TextFile:
    """Open a text file for reading, transparently un-gzipping ``.gz``; ``newline=''`` keeps CRLF visible.

    A byte sequence that is not ``encoding`` raises ``InputFileError`` naming the file, the line and the byte.
    """
    path = Path(path)
    if not path.is_file():
        gz = path.with_name(path.name + ".gz")
        if gz.is_file():
            path = gz
        else:
            raise InputFileError(f"{path}: no such file")
    return TextFile(path, encoding, newline)


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) of each non-blank line of a UTF-8 text file (``.gz`` too), a byte-order
    mark dropped from the first; ``open_text``'s errors."""
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if number == 1:
                line = line.removeprefix("\ufeff")
            if line.strip():
                yield number, line


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """The whole of a text file (universal newlines), with ``open_text``'s errors."""
    with open_text(path, encoding, newline=None) as handle:
        return handle.read()
