"""Search over embeddings: exact top-k, paraphrase mining, clustering (``sbert.search.cluster``) and a persistent
index (``sbert.search.index.folder``), all ranked best first by ``sbert.search.ranking``.

Mining (which needs torch) loads on first use: opening and searching an index does not import torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sbert.search.exact import TopK, semantic_search

if TYPE_CHECKING:
    from sbert.search.mining import Pair, paraphrase_mining

__all__ = ["Pair", "TopK", "paraphrase_mining", "semantic_search"]


def __getattr__(name: str) -> Any:
    if name in ("Pair", "paraphrase_mining"):
        from sbert.search import mining

        return getattr(mining, name)
    raise AttributeError(f"module 'sbert.search' has no attribute {name!r}")
