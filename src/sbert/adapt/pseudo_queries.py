"""Pseudo-queries drawn from documents alone: each generator makes one (query, positive) pair a document.

- ``title``: the title is the query of the body (a bug report's summary asks for its description);
- ``crop``: two independent random spans of one document (Contriever's independent cropping);
- ``ict``: one sentence against the rest of its document (inverse cloze task; the sentence is left in
  the rest one time in ten, as in the ICT paper); text without sentence marks falls back to 16-word pieces;
- ``simcse``: the same text twice; dropout makes the two vectors differ (SimCSE, unsupervised).

Every generator is deterministic given its ``random.Random``; pairs go to in-batch negatives losses.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sbert.data.beir import Document
from sbert.data.examples import RetrievalExample
from sbert.errors import InputFileError


@dataclass(frozen=True)
class PseudoQuery:
    """A query drawn from document ``document`` (its id) and the text of that document it should find."""

    query: str
    positive: str
    document: str

    def example(self) -> RetrievalExample:
        """The (query, positive) row in-batch negatives train on."""
        return RetrievalExample(self.query, self.positive)


Generator = Callable[[Sequence[Document], random.Random], list[PseudoQuery]]

MIN_WORDS = 8  # a document shorter than this gives no crop or cloze pair
CROP_RATIO = (0.1, 0.5)  # a crop is this fraction of the document's words (Contriever)
MAX_QUERY_WORDS = 64  # a crop used as a query is cut to this many words
PIECE_WORDS = 16  # "sentences" of text without sentence marks
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def title_pairs(documents: Sequence[Document], rng: random.Random) -> list[PseudoQuery]:
    """(title, body) for every document with both; a corpus without titles is refused."""
    pairs = [
        PseudoQuery(d.title.strip(), d.text.strip(), d.id) for d in documents if d.title.strip() and d.text.strip()
    ]
    if not pairs:
        raise InputFileError(
            'no document has both a "title" and a "text": the title method needs titles '
            "(choose --method crop, ict or simcse for untitled documents)"
        )
    return pairs


def crop_pairs(documents: Sequence[Document], rng: random.Random) -> list[PseudoQuery]:
    """Two independent random spans of each document of at least ``MIN_WORDS`` words."""
    pairs = []
    for document in documents:
        words = document.joined().split()
        if len(words) < MIN_WORDS:
            continue
        query, positive = _span(words, rng)[:MAX_QUERY_WORDS], _span(words, rng)
        pairs.append(PseudoQuery(" ".join(query), " ".join(positive), document.id))
    return pairs


def _span(words: list[str], rng: random.Random) -> list[str]:
    length = max(2, round(len(words) * rng.uniform(*CROP_RATIO)))
    start = rng.randrange(len(words) - length + 1)
    return words[start : start + length]


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after . ! ? and at line ends), or 16-word pieces when it has none."""
    parts = [p.strip() for p in _SENTENCE_END.split(text) if p.strip()]
    if len(parts) > 1:
        return parts
    words = text.split()
    return [" ".join(words[i : i + PIECE_WORDS]) for i in range(0, len(words), PIECE_WORDS)]


def cloze_pairs(documents: Sequence[Document], rng: random.Random) -> list[PseudoQuery]:
    """(one sentence, the rest of its document) for each document of two or more sentences."""
    pairs = []
    for document in documents:
        parts = sentences(document.joined())
        if len(parts) < 2 or len(document.joined().split()) < MIN_WORDS:
            continue
        pick = rng.randrange(len(parts))
        keep = rng.random() < 0.1
        rest = parts if keep else parts[:pick] + parts[pick + 1 :]
        pairs.append(PseudoQuery(parts[pick], " ".join(rest), document.id))
    return pairs


def same_text_pairs(documents: Sequence[Document], rng: random.Random) -> list[PseudoQuery]:
    """(text, text) for every document: SimCSE's positive is the same text under other dropout."""
    return [PseudoQuery(d.joined(), d.joined(), d.id) for d in documents]


GENERATORS: dict[str, Generator] = {
    "title": title_pairs,
    "crop": crop_pairs,
    "ict": cloze_pairs,
    "simcse": same_text_pairs,
}


def pseudo_queries(documents: Sequence[Document], generators: Sequence[str], seed: int = 0) -> list[PseudoQuery]:
    """The pseudo-queries of each named generator over ``documents``, in a seeded shuffled order."""
    rng = random.Random(seed)
    pairs = [p for name in generators for p in GENERATORS[name](documents, rng)]
    rng.shuffle(pairs)
    return pairs
