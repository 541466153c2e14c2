"""Files of embeddings: ``.npy`` (a numpy array) or ``.jsonl`` (a text and its embedding per line), each with a
``FILE.meta.json`` beside it saying what made them (``sbert encode --out``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sbert.atomic import atomic_file

FORMATS = {".npy": "npy", ".jsonl": "jsonl", ".ndjson": "jsonl"}  # extension -> format


def format_of(out: Path | None) -> str:
    """The format an output file's extension names (None: standard output, JSON lines); an unknown
    extension is refused, not guessed."""
    if out is None:
        return "jsonl"
    if out.suffix.lower() not in FORMATS:
        raise ValueError(
            f"--out {out}: unknown extension {out.suffix or '(none)'!r}; sbert writes .npy (a numpy array) or "
            ".jsonl (a text and its embedding per line); or name the format with --format"
        )
    return FORMATS[out.suffix.lower()]


def meta_path(out: Path) -> Path:
    """Where the description of an embeddings file lies: ``FILE.meta.json`` beside it."""
    return out.with_name(out.name + ".meta.json")


def embedding_meta(model: str, encoder: Any, count: int, normalize: bool, fmt: str, prompt: str | None = None) -> dict:
    """What produced a file of embeddings: vectors from another backend or precision are not comparable
    (int8 vectors can be far from float ones; docs/cpu-inference.md), nor vectors made with another prompt."""
    from sbert.model_names import canonical_name
    from sbert.versions import package_version

    return {
        "format": fmt,
        "count": count,
        "dim": encoder.dim,
        "model": canonical_name(model),
        "backend": encoder.backend_name,
        "precision": encoder.precision,
        "normalized": normalize,
        "max_seq_length": encoder.max_seq_length,
        "prompt": prompt or None,
        "sbert": package_version("sbert"),
    }


def write_embeddings(texts: Sequence[str], embeddings: Any, fmt: str, out: Path | None, meta: dict | None) -> None:
    """Write ``embeddings`` of ``texts`` to ``out`` as ``fmt`` (``npy`` or ``jsonl``; None: JSON lines on
    standard output), atomically, with ``meta`` (``embedding_meta``) beside a file."""
    if fmt == "npy":
        import numpy as np

        if out is None:
            raise ValueError("--format npy needs --out FILE.npy")
        with atomic_file(out, "wb") as handle:
            np.save(handle, embeddings)
    else:
        lines = (
            json.dumps({"text": t, "embedding": e.tolist()}, ensure_ascii=False) + "\n"
            for t, e in zip(texts, embeddings, strict=True)
        )
        if out is None:
            sys.stdout.writelines(lines)
        else:
            with atomic_file(out, "w", encoding="utf-8") as handle:
                handle.writelines(lines)
    if out is not None and meta is not None:
        with atomic_file(meta_path(out), "w", encoding="utf-8") as handle:
            json.dump(meta, handle, indent=2)
