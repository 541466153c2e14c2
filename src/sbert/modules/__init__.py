"""The pieces an encoder is built from, and the names they carry in ``modules.json``."""

from __future__ import annotations

from sbert.modules.base import Module
from sbert.modules.dense import Dense
from sbert.modules.normalize import Normalize
from sbert.modules.pooling import Pooling
from sbert.modules.static import StaticEmbedding
from sbert.modules.transformer import Transformer

MODULE_TYPES: dict[str, type[Module]] = {
    cls.__name__: cls for cls in (Transformer, StaticEmbedding, Pooling, Dense, Normalize)
}


def module_class(type_name: str) -> type[Module] | None:
    """The class for a ``modules.json`` type such as ``sentence_transformers.models.Pooling``, or None."""
    package = type_name.split(".", 1)[0]
    if package not in ("sentence_transformers", "sbert"):
        return None
    return MODULE_TYPES.get(type_name.rsplit(".", 1)[-1])


__all__ = ["MODULE_TYPES", "Dense", "Module", "Normalize", "Pooling", "StaticEmbedding", "Transformer", "module_class"]
