"""The methods ``sbert adapt --method`` offers: which pseudo-query generators feed the in-batch loss.

Adding a method is one entry here. ``DEFAULT_METHOD`` is the one that measured best across collections in
``benchmarks/adapt.py`` (docs/retrieval.md says on which collection it was chosen and where it was reported).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    """A label-free method: its pseudo-query generators (``pseudo_queries.GENERATORS``) and a one-line help."""

    generators: tuple[str, ...]
    help: str


METHODS: dict[str, Method] = {
    "title": Method(("title",), "a document's title as the query of its body"),
    "crop": Method(("crop",), "two independent random spans of one document (Contriever's cropping)"),
    "ict": Method(("ict",), "one sentence against the rest of its document (inverse cloze)"),
    "simcse": Method(("simcse",), "the same text twice under dropout (unsupervised SimCSE)"),
    "title+crop": Method(("title", "crop"), "title pairs and crop pairs together"),
}

DEFAULT_METHOD = "title+crop"


def method(name: str) -> Method:
    """``METHODS[name]``, or a ValueError naming the methods there are."""
    if name not in METHODS:
        raise ValueError(f"adapt method {name!r}: expected one of {', '.join(METHODS)}")
    return METHODS[name]
