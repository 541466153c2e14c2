"""One search set-up: an index opened with the model that answers its queries, and a re-ranker.

``sbert search``, ``sbert serve --index`` and ``sbert eval``'s retrieval all search through a ``Searcher``,
so that what is measured is what is served:

    location --open_index--> Index --search_model--> the model's name
      --the light ONNX query encoder (where allowed), else sbert.load--> encoder
      --index.check_encoder (model, truncate_dim, width, precision)--> Searcher(index, encoder, rerank)
    Searcher.search(queries, options) = search_texts(index, encoder, queries, options)

The light query encoder (``sbert.backends.onnx_query``) embeds queries without torch or transformers; it is
used for a folder index built on the ONNX backend where nothing asks for more: no re-ranker, no prompt, no
device, no backend or precision other than the index's, and queries it embeds as the model would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from sbert.search.base import Hit
from sbert.search.index.base import BaseIndex
from sbert.search.index.homes import is_database_url
from sbert.search.retrieve import SearchOptions, open_index, search_texts, search_vectors

__all__ = ["Searcher", "load_reranker", "open_searcher", "search_model"]


@dataclass(frozen=True)
class Searcher:
    """An opened index with the encoder (and re-ranker) that answer its queries.

    ``encoder``: what ``search_texts`` embeds queries with (an ``Encoder``, or the light ONNX query encoder);
    ``rerank``: a one-label cross-encoder (``PairScorer``) or None."""

    index: BaseIndex
    encoder: Any
    rerank: Any | None = None

    def options(self, *, rerank: bool = True, **fields: Any) -> SearchOptions:
        """``SearchOptions(**fields)``, re-ranked by this searcher's cross-encoder (where it has one and
        ``rerank``), with what is left unset settled for its index (``SearchOptions.for_index``). A
        ``ValueError`` for options that do not go together (a ``lead`` with re-ranking)."""
        cross = self.rerank if rerank else None
        return SearchOptions(rerank=cross, **fields).for_index(self.index)

    def search(
        self,
        queries: Sequence[str],
        options: SearchOptions | None = None,
        *,
        prompt_name: str | None = None,
        prompt: str | None = None,
        allow_mixed_backend: bool = False,
        batch_size: int = 32,
        on_truncation: str = "warn",
    ) -> list[list[Hit]]:
        """Each query's hits (``search_texts``); ``options`` None: ``self.options()``."""
        return search_texts(
            self.index,
            self.encoder,
            queries,
            self.options() if options is None else options,
            batch_size=batch_size,
            prompt_name=prompt_name,
            prompt=prompt,
            allow_mixed_backend=allow_mixed_backend,
            on_truncation=on_truncation,
        )

    def search_vectors(
        self, vectors: Any, queries: Sequence[str], options: SearchOptions | None = None, **keywords: Any
    ) -> list[list[Hit]]:
        """Each query's hits for query vectors this searcher's encoder made (``search_vectors``; ``keywords``:
        ``allow_mixed_backend``)."""
        options = self.options() if options is None else options
        backend = getattr(self.encoder, "runtime", None)
        return search_vectors(self.index, vectors, queries, options, backend=backend, **keywords)


def search_model(index: BaseIndex, model: str | Path | None) -> str | Path:
    """The model to embed ``index``'s queries (or new texts) with: ``model``, checked to be the index's own
    (``IndexMismatchError`` otherwise), or, None, the model the index records."""
    chosen = model or index.model
    index.check_model(chosen)
    return chosen


def open_searcher(
    location: str | Path,
    *,
    model: str | Path | None = None,
    table: str | None = None,
    backend: str | None = None,
    precision: str | None = None,
    device: str | None = None,
    allow_pickle: bool = False,
    rerank: str | Path | Any | None = None,
    light: bool = True,
    allow_mixed_backend: bool = False,
    prompts_given: bool = False,
    queries: Sequence[str] | None = None,
) -> Searcher:
    """The index at ``location`` (a folder, or a ``postgresql://`` URL with ``table``) with its model (``model``
    must be the index's: ``search_model``) and ``rerank`` (a cross-encoder or its folder), checked: the
    model's width, ``truncate_dim`` and backend against what the index holds (vectors of another precision
    only with ``allow_mixed_backend``).

    ``backend``/``precision`` (None: not chosen) say how to run the model; ``device`` where. ``light``
    allows the torch-free query encoder of an ONNX-built folder index, used where ``queries`` (the texts
    about to be searched) are given and nothing asks for more (see the module; ``prompts_given``: a
    prompt other than the model's query prompt is coming)."""
    index = open_index(location, table=table)
    name = search_model(index, model)
    runtime = None if backend is None and precision is None else _runtime(backend, precision)
    needs_model = rerank is not None or bool(device) or prompts_given  # what the light encoder cannot do
    encoder = _light_encoder(location, index, queries, runtime) if light and not needs_model else None
    if encoder is None:  # the model itself (torch and transformers loaded: seconds)
        import sbert

        backend, precision = (runtime or _runtime(None, None)).split("/")
        chosen = cast(Literal["torch", "onnx"], backend)  # a name of BACKENDS: use_backend refuses others
        encoder = sbert.load(name, device=device, allow_pickle=allow_pickle, backend=chosen, precision=precision)
        index.check_encoder(name, encoder, allow_mixed_backend)  # int8 queries against float vectors degrade
    else:
        index.check_backend(encoder.runtime, allow_mixed_backend)
    return Searcher(index, encoder, load_reranker(rerank, device=device, allow_pickle=allow_pickle))


def load_reranker(rerank: str | Path | Any | None, *, device: str | None = None, allow_pickle: bool = False) -> Any:
    """``rerank`` as a cross-encoder: loaded from a folder or name, else as given (None: no re-ranking)."""
    if not isinstance(rerank, (str, Path)):
        return rerank
    from sbert.cross_encoder import CrossEncoder

    return CrossEncoder.load(rerank, device=device, allow_pickle=allow_pickle)


def _runtime(backend: str | None, precision: str | None) -> str:
    """The runtime as an index records it, "backend/precision" (``backend`` None: torch; ``precision`` None:
    the backend's first)."""
    from sbert.backends import runtime_of

    return "/".join(runtime_of(backend or "torch", precision))


def _light_encoder(location: str | Path, index: BaseIndex, queries: Sequence[str] | None, runtime: str | None) -> Any:
    """The light query encoder a folder index built on ONNX records, where ``runtime`` (the backend/precision
    asked for; None: not chosen) is the index's own and it embeds ``queries`` as the model would; else None."""
    if queries is None or is_database_url(location):
        return None
    if runtime is not None and runtime != index.manifest.get("backend"):
        return None
    from sbert.backends.onnx_query import light_query_encoder

    encoder = light_query_encoder(index)
    return encoder if encoder is not None and encoder.accepts(queries) else None
