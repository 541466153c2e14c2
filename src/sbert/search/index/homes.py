"""Where an index lives: every home of an index, one row each, by the kind of location that names it.

``sbert.search.retrieve``'s ``open_index`` and ``build_index`` find the class here (``index_class``): None is
the memory, a URL whose scheme a row names is that row's home, anything else a folder. A new home is a
module with a subclass of ``sbert.search.index.base.BaseIndex`` (its ``open_at``, ``check_location`` and
``build_at`` say how it opens and builds at its locations) and one row of ``HOMES``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sbert.search.index.base import BaseIndex

__all__ = ["FOLDER", "HOMES", "MEMORY", "Home", "home_of", "index_class", "is_database_url"]

MEMORY, FOLDER = "memory", "folder"


@dataclass(frozen=True)
class Home:
    """One home: its index class (``module:Class``, imported when used, so that a database's driver loads
    only for its URLs) and the URL prefixes that name it (none: the memory and the folder)."""

    index: str
    schemes: tuple[str, ...] = ()

    def load(self) -> type[BaseIndex]:
        module, _, name = self.index.partition(":")
        return getattr(importlib.import_module(module), name)


HOMES: dict[str, Home] = {
    MEMORY: Home("sbert.search.index.memory:MemoryIndex"),  # location None
    FOLDER: Home("sbert.search.index.folder:VectorIndex"),  # a path
    "postgresql": Home("sbert.search.index.postgres:PgVectorIndex", ("postgresql://", "postgres://")),
}


def home_of(location: str | Path | None) -> str:
    """The name of the home at ``location``: ``memory`` for None, a URL's by its scheme, else ``folder``."""
    if location is None:
        return MEMORY
    if isinstance(location, str):
        for name, home in HOMES.items():
            if home.schemes and location.startswith(home.schemes):
                return name
    return FOLDER


def index_class(location: str | Path | None) -> type[BaseIndex]:
    """The index class of the home at ``location`` (see ``home_of``)."""
    return HOMES[home_of(location)].load()


def is_database_url(location: str | Path | None) -> bool:
    """Whether ``location`` is a database's URL (``postgresql://...``) rather than a folder."""
    return home_of(location) not in (MEMORY, FOLDER)
