"""Persistent and in-memory indexes: one file per backend (``folder``, ``memory``, ``postgres``), the rows'
storage (``store``), the search structures (``structures``), the shared query path (``query``) and what an
index records of its model (``recorded_model``). Open one with ``sbert.search.retrieve.open_index``."""
