"""Serving LoRA adapters over one base: ``sbert serve --adapter NAME=FOLDER ...``'s set-up.

One base model in memory (``sbert.shared_base.SharedBase``), each adapter beside it by name; an index built
with one of them is searched with that one (its manifest records the adapter's weights, ``adapter_folder``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from sbert.serve.engine import EmbeddingEngine, Lane, ServedEncoder
from sbert.serve.settings import EngineSettings

if TYPE_CHECKING:
    from sbert.shared_base import SharedBase


def adapter_engines(
    base: ServedEncoder, adapters: SharedBase | None, base_names: frozenset[str], settings: EngineSettings | None
) -> tuple[EmbeddingEngine, dict[str, EmbeddingEngine | Lane]]:
    """The base's engine and each adapter's way in, by name: the adapters share the base's batcher and workers
    (a batch, and so a forward pass, holds one adapter's requests: two are never in one); one whose vectors
    are of another size than the base's gets an engine of its own. A name that is also one of the base
    model's (``base_names``) is refused."""
    encoders = {name: cast(ServedEncoder, adapters.encoder(name)) for name in adapters.names} if adapters else {}
    clash = sorted(set(encoders) & base_names)
    if clash:
        raise ValueError(f"adapter name {clash[0]!r} is a name of the base model: name the adapter otherwise")
    shared = {name: each for name, each in encoders.items() if each.dim == base.dim}
    engine = EmbeddingEngine(base, settings, adapters=shared)
    ways: dict[str, EmbeddingEngine | Lane] = {}
    for name, each in encoders.items():  # torch's threads are the process's: the base's engine divided them
        ways[name] = engine.lane(name) if name in shared else EmbeddingEngine(each, settings, divide_threads=False)
    return engine, ways


def named_folders(pairs: Sequence[str], what: str = "adapter") -> dict[str, str]:
    """``["tracker-a=models/tracker-a", ...]`` as {name: folder}; ValueError for a pair without both sides or a
    name given twice."""
    named: dict[str, str] = {}
    for pair in pairs:
        name, sep, folder = pair.partition("=")
        if not sep or not name.strip() or not folder.strip():
            raise ValueError(f"{what} {pair!r}: expected NAME=FOLDER, e.g. tracker-a=models/tracker-a")
        if name.strip() in named:
            raise ValueError(f"{what} name {name.strip()!r} is given twice")
        named[name.strip()] = folder.strip()
    return named


NAME = re.compile(r"[A-Za-z0-9][\w.-]*")  # an index's name in --index NAME=LOCATION (no ':' or '/': not a path)


def named_indexes(values: Sequence[str]) -> str | dict[str, str] | None:
    """``--index``'s values: none (None); one location, unnamed (the string); or ``NAME=LOCATION`` each (a dict
    by name, which a search names as ``index``). Several must each be named; a name given twice is refused."""
    named = [value.partition("=") for value in values]
    if len(values) == 1 and not (named[0][1] and NAME.fullmatch(named[0][0].strip())):
        return values[0]  # a folder or postgresql://...?a=b: its '=' names nothing
    for value, (name, sep, location) in zip(values, named, strict=True):
        if not sep or not NAME.fullmatch(name.strip()) or not location.strip():
            raise ValueError(
                f"index {value!r}: several indexes are served by name, as NAME=LOCATION (e.g. tracker-a=ix-a); "
                "NAME: letters, digits, '.', '_' or '-'"
            )
    return named_folders(values, "index") if values else None


def load_served(
    model: str,
    adapters: Mapping[str, str],
    *,
    max_adapters: int,
    device: str | None = None,
    allow_pickle: bool = False,
    index=None,
) -> tuple[SharedBase, str | None]:
    """The base ``model`` with ``adapters`` over it, and the adapter ``index`` was built with (``own_adapter``;
    None: the base, or no index)."""
    from sbert.shared_base import SharedBase

    shared = SharedBase.load(model, adapters, max_adapters=max_adapters, device=device, allow_pickle=allow_pickle)
    return shared, None if index is None else own_adapter(shared, model, adapters, index)


def own_adapter(shared: SharedBase, model: str, adapters: Mapping[str, str], index) -> str | None:
    """The name of the adapter among ``adapters`` that ``index`` was built with (None: the base ``model``); an
    index built with another model or adapter is refused, as ``sbert serve --index`` refuses one."""
    from sbert.adapter_folder import adapter_record

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
    index.check_encoder(Path(adapters[own]) if own else model, shared.encoder(own))
    return own


def open_adapter_service(
    model: str | None,
    adapters: Mapping[str, str],
    *,
    index: str | Mapping[str, str] | None = None,
    rerank: str | None = None,
    max_adapters: int,
    device: str | None = None,
    allow_pickle: bool = False,
) -> dict:
    """What ``serve`` serves with adapters, as its keywords (``open_service``'s, plus ``adapters`` and
    ``index_adapter``): the base ``model`` (default: the default model) with ``adapters`` over it, and with
    ``index`` (a folder or a ``postgresql://`` URL; or several, by name) each index, searched with its own
    adapter."""
    from sbert.model_names import DEFAULT
    from sbert.search.retrieve import open_index
    from sbert.search.searcher import load_reranker

    name = model or DEFAULT
    named = dict(index) if isinstance(index, Mapping) else {} if index is None else {"": index}
    opened = {key: open_index(location) for key, location in named.items()}
    shared, _ = load_served(name, adapters, max_adapters=max_adapters, device=device, allow_pickle=allow_pickle)
    own = {key: own_adapter(shared, name, adapters, each) for key, each in opened.items()}
    cross = load_reranker(rerank, device=device, allow_pickle=allow_pickle)
    several = isinstance(index, Mapping)
    return {
        "encoder": shared.encoder(None),
        "model_name": name,
        "index": opened if several else opened.get(""),
        "cross_encoder": cross,
        "adapters": shared,
        "index_adapter": own if several else own.get(""),
    }
