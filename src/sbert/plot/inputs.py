"""What ``sbert plot map`` reads beside the texts: a labels file, a label field of JSON lines, embeddings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sbert.errors import InputFileError


def read_labels(path: str | Path, count: int, texts_name: str) -> list[str]:
    """One label per line of ``path`` (UTF-8, no empty lines), as many as the ``count`` texts of ``texts_name``."""
    from sbert.data.lines import read_lines

    labels = read_lines(path)
    if len(labels) != count:
        raise InputFileError(
            f"{path}: {len(labels):,} labels for the {count:,} texts of {texts_name}; expected one label per text, "
            "line by line"
        )
    return labels


def read_label_field(path: str | Path, field: str, skip_empty: bool = False, columns: Any = None) -> list[str]:
    """The value of ``field`` in each record of a ``.jsonl``/``.csv``/``.tsv`` corpus, for the records
    ``read_corpus`` keeps (``columns``: its ``Columns``)."""
    from sbert.data.corpus import record_fields

    labels = []
    for number, value in record_fields(path, field, skip_empty=skip_empty, columns=columns):
        if value is None:
            raise InputFileError(f"{path}: line {number}: no {field!r} field to colour the map by")
        labels.append(str(value))
    return labels


def read_embeddings(path: str | Path) -> tuple[np.ndarray, str | None]:
    """An (n, d) ``.npy`` file of embeddings (``sbert encode --out``) and the model its ``.meta.json`` names."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such file")
    try:
        embeddings = np.load(path, allow_pickle=False)
    except ValueError as err:
        raise InputFileError(f"{path}: not a numpy array file ({err})") from err
    if embeddings.ndim != 2 or len(embeddings) == 0 or not np.issubdtype(embeddings.dtype, np.number):
        raise InputFileError(f"{path}: expected a non-empty (n, d) array of numbers, got {embeddings.shape}")
    meta = path.with_name(path.name + ".meta.json")
    model = json.loads(meta.read_text(encoding="utf-8")).get("model") if meta.is_file() else None
    return embeddings, model
