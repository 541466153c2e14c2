"""Training pairs from a BEIR collection: (query, relevant document) for each judgment above 0 of a split.

``--format beir`` reads them: ``--train FOLDER`` takes the folder's ``train`` split, ``--train
FOLDER/qrels/SPLIT.tsv`` (or ``.tsv.gz``) that split. A document's text is its title and its text
joined by a space (``Document.joined``), as retrieval evaluation embeds it.
"""

from __future__ import annotations

from pathlib import Path

from sbert.data.examples import RetrievalExample
from sbert.errors import InputFileError

DEFAULT_SPLIT = "train"


def beir_source(path: str | Path) -> tuple[Path, str]:
    """(folder, split) named by ``path``: a BEIR folder (its ``train`` split) or a ``qrels/SPLIT.tsv[.gz]`` in one."""
    path = Path(path)
    if path.is_dir():
        return path, DEFAULT_SPLIT
    name = path.name.removesuffix(".gz")
    if path.parent.name == "qrels" and name.endswith(".tsv"):
        return path.parent.parent, name.removesuffix(".tsv")
    raise InputFileError(f"{path}: expected a BEIR folder or the qrels file of a split in one (FOLDER/qrels/SPLIT.tsv)")


def read_beir_pairs(path: str | Path, split: str | None = None) -> list[RetrievalExample]:
    """One (query, document) example per relevant judgment of the split ``path`` names (``split`` overrides
    it), in the order of the qrels file; no hard negatives (``sbert mine-negatives`` adds them)."""
    from sbert.data.beir import read_beir

    folder, named = beir_source(path)
    collection = read_beir(folder, split or named)
    texts = {doc_id: doc.joined(" ") for doc_id, doc in collection.corpus.items()}
    return [
        RetrievalExample(collection.queries[query_id], texts[doc_id])
        for query_id, judged in collection.qrels.items()
        for doc_id, score in judged.items()
        if score > 0
    ]
