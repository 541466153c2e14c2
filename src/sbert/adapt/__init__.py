"""Fit a model to a collection from its documents alone: pseudo-queries drawn from the documents, trained
with in-batch negatives (``sbert adapt``). No queries, no relevance judgments.

- the documents of a corpus (a BEIR ``corpus.jsonl[.gz]``, a folder holding one, JSON lines or plain text),
  with their titles where they have them: ``sbert.data.corpus.read_corpus_documents``.
- ``pseudo_queries.py``: the generators (``GENERATORS``): a title as the query of its body, two independent
  crops of one document, one sentence against the rest (inverse cloze), the same text twice (SimCSE).
- ``methods.py``: the methods ``sbert adapt --method`` offers (``METHODS``), each a mix of generators.
- ``recipe.py``: ``adapt``: build the pairs, train through ``sbert.training.Trainer`` (checkpoints,
  Ctrl-C, ``--resume``), save a sentence-transformers folder.
"""

from sbert.adapt.methods import DEFAULT_METHOD, METHODS
from sbert.adapt.recipe import AdaptSettings, adapt

__all__ = ["DEFAULT_METHOD", "METHODS", "AdaptSettings", "adapt"]
