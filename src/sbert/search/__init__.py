"""Search over embeddings: exact top-k, paraphrase mining, clustering (``sbert.search.cluster``) and a persistent
index (``sbert.search.index``), all ranked best first by ``sbert.search.ranking``."""

from sbert.search.exact import TopK, semantic_search
from sbert.search.mining import Pair, paraphrase_mining

__all__ = ["Pair", "TopK", "paraphrase_mining", "semantic_search"]
