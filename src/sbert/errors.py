"""Exceptions raised by sbert. Each message names the path or item at fault and what was expected."""

from __future__ import annotations


class SbertError(Exception):
    """Base class of every error sbert raises on purpose."""


class ModelNotFoundError(SbertError, FileNotFoundError):
    """A model name or folder that does not exist on this machine (sbert never downloads)."""


class ModelFormatError(SbertError, ValueError):
    """A model folder that exists but is missing files or holds malformed ones."""


class InputFileError(SbertError, ValueError):
    """An input file that cannot be read as expected (names the file and the line)."""


class IndexFormatError(SbertError, ValueError):
    """A vector index folder that is missing, incomplete or malformed (names the folder and the file)."""


class IndexMismatchError(SbertError, ValueError):
    """Embeddings or a model that do not match the ones a vector index was built with."""


class IndexExistsError(SbertError, FileExistsError):
    """A vector index is already at the path a new one would be written to."""


class IndexUnavailableError(SbertError, RuntimeError):
    """An index whose store cannot be reached now (a database that is down): a later try may succeed."""
