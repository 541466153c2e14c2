"""The methods ``sbert adapt --method`` offers: which pseudo-query generators, and which objective.

In-batch methods train ``mnrl`` on (pseudo-query, its document's text); teacher methods (``--teacher``)
find candidates for each pseudo-query with BM25 and the student, have the teacher score them
(``sbert.adapt.teacher``) and train the student on the teacher's margins or ranking. Adding a method is
one entry here. ``DEFAULT_METHOD`` is the one that measured best across collections in
``benchmarks/adapt.py`` (benchmarks/results/adapt.md; docs/adapt.md says how it was chosen).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sbert.data.beir import Document

if TYPE_CHECKING:
    from sbert.losses.objectives import ObjectiveKind


@dataclass(frozen=True)
class Method:
    """A label-free method: its pseudo-query generators (``pseudo_queries.GENERATORS``), its objective
    (``mnrl``, ``tsdae``, or with a teacher ``margin-mse`` / ``distill-kl``), a one-line help, and the
    method of a ``first`` stage trained before it (its model is this stage's base)."""

    generators: tuple[str, ...]
    help: str
    objective: str = "mnrl"
    first: str | None = None

    @property
    def kind(self) -> ObjectiveKind:
        """The objective's entry in ``sbert.losses.objectives.OBJECTIVES`` (its facts and its loss)."""
        from sbert.losses.objectives import OBJECTIVES  # on use: the CLI's tables stay free of torch

        return OBJECTIVES[self.objective]

    @property
    def needs_teacher(self) -> bool:
        """Trains on the rows a ``--teacher`` scored."""
        return self.kind.needs_teacher

    @property
    def in_batch(self) -> bool:
        """Trains with in-batch negatives (what ``--guide`` masks)."""
        return self.kind.in_batch


METHODS: dict[str, Method] = {
    "title": Method(("title",), "a document's title as the query of its body"),
    "crop": Method(("crop",), "two independent random spans of one document (Contriever's cropping)"),
    "ict": Method(("ict",), "one sentence against the rest of its document (inverse cloze)"),
    "simcse": Method(("simcse",), "the same text twice under dropout (unsupervised SimCSE)"),
    "title+crop": Method(("title", "crop"), "title pairs and crop pairs together"),
    "distill-margin": Method(
        ("title", "crop"),
        "a --teacher scores BM25's and the student's candidates; learn its margins (GPL)",
        "margin-mse",
    ),
    "distill-kl": Method(
        ("title", "crop"),
        "a --teacher scores BM25's and the student's candidates; learn its ranking (KL)",
        "distill-kl",
    ),
    # TSDAE reads each document's text once: the simcse generator's (text, text) rows give exactly that.
    "tsdae": Method(("simcse",), "rebuild each document from the vector of its words, 60% deleted (TSDAE)", "tsdae"),
    "tsdae+title+crop": Method(
        ("title", "crop"),
        "two stages of --steps each: tsdae, then title+crop from its model",
        first="tsdae",
    ),
}

# The best on average over benchmarks/adapt.py's two collections (searched dense, three seeds each); each
# collection alone prefers another method within a seed's spread (benchmarks/results/adapt.md).
DEFAULT_METHOD = "title"
# For a corpus most of whose documents have no title, the best method that needs none, chosen the same way
# (ahead of ict and simcse on both collections).
UNTITLED_METHOD = "crop"
MIN_TITLED = 0.5  # the share of documents with a title (and a body) the default method needs


def default_method(documents: Sequence[Document]) -> str:
    """The method ``sbert adapt`` runs when none is named: ``DEFAULT_METHOD`` where at least ``MIN_TITLED``
    of the documents have both a title and a body, else ``UNTITLED_METHOD``."""
    titled = sum(1 for d in documents if d.title.strip() and d.text.strip())
    return DEFAULT_METHOD if documents and titled >= MIN_TITLED * len(documents) else UNTITLED_METHOD


def method(name: str) -> Method:
    """``METHODS[name]``, or a ValueError naming the methods there are."""
    if name not in METHODS:
        raise ValueError(f"adapt method {name!r}: expected one of {', '.join(METHODS)}")
    return METHODS[name]
