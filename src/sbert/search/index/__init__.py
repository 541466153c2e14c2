"""Persistent and in-memory indexes: the base every home shares (``base``: the ``BaseIndex`` class and its checks),
which home lives at a location (``homes``), one file per home (``folder``, ``memory``, ``postgres``), the
folder's storage (``store``), its search structures (``structures``) and the query path of the folder and
memory indexes (``query``). Open one with ``sbert.search.retrieve.open_index``."""
