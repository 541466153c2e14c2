"""Where the evaluation and training data live: ``--data``, else ``$SBERT_DATA``, else ``../shared/data``."""

from __future__ import annotations

import gzip
import os
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


def open_text(path: str | Path, encoding: str = "utf-8") -> IO[str]:
    """Open a text file for reading, transparently un-gzipping ``.gz``; ``newline=''`` keeps CRLF visible."""
    path = Path(path)
    if not path.is_file():
        gz = path.with_name(path.name + ".gz")
        if gz.is_file():
            path = gz
        else:
            raise InputFileError(f"{path}: no such file")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return open(path, encoding=encoding, newline="")
