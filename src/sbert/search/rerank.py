"""Retrieve and re-rank: a cross-encoder re-scores a bi-encoder's candidates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sbert.search import ranking
from sbert.search.base import Hit

if TYPE_CHECKING:
    from sbert.protocols import PairScorer


def rerank(
    cross_encoder: PairScorer, query: str, hits: Sequence[Hit], top_k: int | None = None, batch_size: int = 32
) -> list[Hit]:
    """``hits`` re-ordered by the cross-encoder's score of (query, hit text), best ``top_k`` first.

    The returned hits carry the cross-encoder's score; equal scores keep the hits' order. Hits need
    their text (index built with texts).
    """
    if not hits:
        return []
    missing = [h.id for h in hits if h.text is None]
    if missing:
        raise ValueError(f"cannot re-rank hits without text (ids {missing[:5]}); build the index with texts")
    scores = cross_encoder.predict([(query, h.text) for h in hits], batch_size=batch_size)
    if scores.ndim != 1:
        raise ValueError("re-ranking needs a one-label cross-encoder")
    return [hits[i]._replace(score=float(scores[i])) for i in ranking.order(scores)[: top_k or None]]
