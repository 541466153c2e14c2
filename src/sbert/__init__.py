"""sbert: Sentence-BERT sentence embeddings (Reimers & Gurevych, EMNLP 2019).

    >>> import sbert
    >>> model = sbert.load()                       # all-MiniLM-L6-v2, shipped in a package
    >>> emb = model.encode(["A man eats food.", "Someone is eating."])
    >>> sbert.similarity.cosine(emb, emb)          # (2, 2) matrix
    >>> index = sbert.Index.build(["A man eats food.", "A cat sleeps."], model=model)   # in memory
    >>> index.search("someone eating", k=1)        # [Hit(id='0', score=..., text='A man eats food.', ...)]

Heavy libraries (torch, transformers) load on first use, not at ``import sbert``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

__version__ = "0.1.0"

if TYPE_CHECKING:
    from sbert import similarity
    from sbert.encoder import Encoder
    from sbert.search.api import Hit, Index


def load(
    name_or_path: str | Path = "default",
    *,
    allow_pickle: bool = False,
    device: str | None = None,
    backend: Literal["torch", "onnx"] = "torch",
    precision: str = "fp32",
    truncate_dim: int | None = None,
) -> Encoder:
    """Load a sentence encoder from a local folder or a shipped model name; never downloads.

    ``name_or_path``: ``"default"`` (all-MiniLM-L6-v2), a sentence-transformers folder, or a plain
    Hugging Face folder (mean pooling is added). ``allow_pickle`` permits ``pytorch_model.bin``
    weights, which can run code when loaded. ``device``: "cpu", "cuda", ... (default: cuda if present).
    ``backend``/``precision``: "torch" with "fp32" or "bf16", or "onnx" with "fp32" or "int8" (CPU;
    see ``Encoder.use_backend``). ``truncate_dim``: keep the first that many coordinates of each vector
    (default: the model's own setting in config_sentence_transformers.json, if any).
    """
    from sbert.encoder import Encoder
    from sbert.model_names import resolve

    encoder = Encoder.load(resolve(name_or_path), allow_pickle=allow_pickle, device=device, truncate_dim=truncate_dim)
    if backend != "torch" or precision != "fp32":
        encoder.use_backend(backend, precision)
    return encoder


_MODULES = {"similarity": "sbert.similarity", "cluster": "sbert.search.cluster"}  # sbert.<name>, loaded on use
_NAMES = {"Encoder": "sbert.encoder", "Index": "sbert.search.api", "Hit": "sbert.search.api"}  # sbert.<name>: a class


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'sbert' has no attribute {name!r}")


__all__ = ["Encoder", "Hit", "Index", "__version__", "load", "similarity"]
