"""Serving LoRA adapters over one base: ``sbert serve --adapter NAME=FOLDER ...``'s set-up.

One base model in memory (``sbert.shared_base.SharedBase``), each adapter beside it by name; an index built
with one of them is searched with that one (its manifest records the adapter's weights, ``adapter_folder``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from sbert.serve.engine import EmbeddingEngine, ServedEncoder
from sbert.serve.settings import EngineSettings

if TYPE_CHECKING:
    from sbert.shared_base import SharedBase


def adapter_engines(
    adapters: SharedBase | None, base_names: frozenset[str], settings: EngineSettings | None
) -> dict[str, EmbeddingEngine]:
    """An engine per adapter (its own batches: requests of two adapters never share one), by name; a name that
    is also one of the base model's (``base_names``) is refused."""
    if adapters is None:
        return {}
    clash = sorted(set(adapters.names) & base_names)
    if clash:
        raise ValueError(f"adapter name {clash[0]!r} is a name of the base model: name the adapter otherwise")
    encoders = {name: cast(ServedEncoder, adapters.encoder(name)) for name in adapters.names}  # an Encoder each
    return {name: EmbeddingEngine(encoder, settings, divide_threads=False) for name, encoder in encoders.items()}


def named_folders(pairs: Sequence[str]) -> dict[str, str]:
    """``["tracker-a=models/tracker-a", ...]`` as {name: folder}; ValueError for a pair without both sides or a
    name given twice."""
    named: dict[str, str] = {}
    for pair in pairs:
        name, sep, folder = pair.partition("=")
        if not sep or not name.strip() or not folder.strip():
            raise ValueError(f"adapter {pair!r}: expected NAME=FOLDER, e.g. tracker-a=models/tracker-a")
        if name.strip() in named:
            raise ValueError(f"adapter name {name.strip()!r} is given twice")
        named[name.strip()] = folder.strip()
    return named


def load_served(
    model: str,
    adapters: Mapping[str, str],
    *,
    max_adapters: int,
    device: str | None = None,
    allow_pickle: bool = False,
    index=None,
) -> tuple[SharedBase, str | None]:
    """The base ``model`` with ``adapters`` over it, and the adapter ``index`` was built with (None: the base, or
    no index); an index built with another model or adapter is refused, as ``sbert serve --index`` refuses one."""
    from sbert.adapter_folder import adapter_record
    from sbert.shared_base import SharedBase

    shared = SharedBase.load(model, adapters, max_adapters=max_adapters, device=device, allow_pickle=allow_pickle)
    if index is None:
        return shared, None
    recorded = index.manifest.get("adapter")
    own = next(
        (n for n, f in adapters.items() if recorded and (adapter_record(f) or {}).get("sha256") == recorded["sha256"]),
        None,
    )
    if recorded and own is None:
        raise ValueError(
            f"index {index.path} was built with adapter {recorded['name']!r}, which is not among the adapters served "
            f"({', '.join(adapters)}): add it with --adapter NAME={recorded['name']} or serve another index"
        )
    encoder = shared.encoder(own)
    index.check_model(Path(adapters[own]) if own else model, None)
    index.fit_truncate_dim(encoder)
    index.check_model(Path(adapters[own]) if own else model, encoder.dim)
    index.check_backend(encoder.runtime)
    return shared, own


def open_adapter_service(
    model: str | None,
    adapters: Mapping[str, str],
    *,
    index: str | None = None,
    rerank: str | None = None,
    max_adapters: int,
    device: str | None = None,
    allow_pickle: bool = False,
) -> dict:
    """What ``serve`` serves with adapters, as its keywords (``open_service``'s, plus ``adapters`` and
    ``index_adapter``): the base ``model`` (default: the default model) with ``adapters`` over it, and with
    ``index`` (a folder or a ``postgresql://`` URL) the index, searched with its own adapter."""
    from sbert.model_names import DEFAULT
    from sbert.search.retrieve import open_index
    from sbert.search.searcher import load_reranker

    name = model or DEFAULT
    opened = open_index(index) if index is not None else None
    shared, own = load_served(
        name, adapters, max_adapters=max_adapters, device=device, allow_pickle=allow_pickle, index=opened
    )
    cross = load_reranker(rerank, device=device, allow_pickle=allow_pickle)
    return {
        "encoder": shared.encoder(None),
        "model_name": name,
        "index": opened,
        "cross_encoder": cross,
        "adapters": shared,
        "index_adapter": own,
    }
