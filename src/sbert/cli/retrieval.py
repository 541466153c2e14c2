"""``sbert index``, ``search``, ``mine`` and ``cluster``: the uses of embeddings, as thin shells over the library."""

from __future__ import annotations

import contextlib
import json
import math

import click

from sbert.cli.common import (
    auto_kind_option,
    column_options,
    device_options,
    friendly_errors,
    load_model,
    model_options,
    on_interrupt,
)
from sbert.cli.embeddings import prompt_options
from sbert.search.auto import QUERIES as AUTO_QUERIES


def _embed(encoder, texts: list[str], batch_size: int, progress: bool | None):
    return encoder.encode(texts, batch_size=batch_size, show_progress=progress, on_truncation="ignore")


class IndexLocation(click.ParamType):
    """An index: a folder (which need not exist yet: opening it says what is missing) or a postgresql:// URL;
    a file is refused at once, a corpus with the command that makes an index of it."""

    name = "folder"

    def convert(self, value, param, ctx):
        from pathlib import Path

        from sbert.search.base import is_database_url

        text = str(value)
        if is_database_url(text) or not Path(text).is_file():
            return text
        from sbert.data.corpus import corpus_format
        from sbert.errors import InputFileError

        try:
            corpus_format(text)
        except InputFileError:
            raise click.ClickException(f"{text} is a file, not an index folder: an index is a folder that "
                                       "`sbert index build CORPUS --out FOLDER` writes") from None  # fmt: skip
        raise click.ClickException(
            f"{text} is a corpus (a file of texts), not an index: index it first with `sbert index build {text} "
            "--out INDEX`, then give INDEX here"
        )


INDEX = IndexLocation()


def _check_corpus(ctx, param, value):
    """A corpus argument's format, told by its extension before anything is read or loaded (``corpus_format``)."""
    from sbert.data.corpus import corpus_format
    from sbert.errors import InputFileError

    try:
        corpus_format(value)
    except InputFileError as err:
        raise click.ClickException(str(err)) from None
    return value


def _echo_json(value) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=1))


def _clip(text: str | None, width: int = 100) -> str:
    text = "" if text is None else " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _lock_option(func):
    return click.option(
        "--lock-timeout",
        default=600.0,
        show_default=True,
        type=click.FloatRange(min=0),
        help="Seconds to wait for another process writing the same index.",
    )(func)


def _mixed_option(func):
    return click.option(
        "--allow-mixed-backend",
        is_flag=True,
        help="Use vectors of another precision than the index's (e.g. onnx-int8 with fp32); results degrade.",
    )(func)


def _chunk_options(func):
    func = click.option(
        "--mode",
        type=click.Choice(["maxp", "mean"]),
        default="maxp",
        show_default=True,
        help="With --chunk: score a document by its best window, or by the mean of its windows' vectors.",
    )(func)
    func = click.option(
        "--overlap",
        type=click.IntRange(min=0),
        help="With --chunk: tokens shared by consecutive windows [default: 32, a quarter of a shorter --window].",
    )(func)
    func = click.option(
        "--window", type=click.IntRange(min=1), help="With --chunk: tokens per window [default: the model's limit]."
    )(func)
    func = click.option(
        "--max-windows",
        type=click.IntRange(min=0),
        help="With --chunk: windows kept per document, its first ones; the rest of a longer one (a pasted log) is "
        "left out; 0 keeps every window [default: 32, some 6,000 words with the default model]. Recorded: add uses it.",
    )(func)
    func = click.option(
        "--bm25/--no-bm25",
        default=None,
        help="Keep a BM25 index of the texts beside the vectors, which search fuses with (hybrid) [default: kept, "
        "in a folder index: hybrid weighted 0.7 gained over dense search on both collections measured].",
    )(func)
    return click.option(
        "--chunk",
        is_flag=True,
        help="Index long texts as documents: split into overlapping token windows; search returns documents.",
    )(func)


def _table_option(func):
    return click.option(
        "--table", help="With a postgresql:// URL: the index's table [default: the URL's #fragment, else sbert_index]."
    )(func)


def _corpus_options(func):
    func = column_options(func)
    func = click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal).")(func)
    func = click.option("--skip-empty", is_flag=True, help="Skip empty lines instead of failing on them.")(func)
    return click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))(func)


# -- index ---------------------------------------------------------------------------------------------
@click.group()
def index() -> None:
    """Build and change a persistent vector index (embeddings, ids and texts in a folder).

    The index records the model, backend and precision it was built with: `add` and `search` embed with
    that model (--model, when given, must name it) and refuse another precision unless
    --allow-mixed-backend; `delete` and `info` embed nothing and take no model.
    """


@index.command("build")
@click.argument("corpus", metavar="CORPUS", callback=_check_corpus)
@click.option(
    "--out", "-o", "--db", "out", required=True, help="Index folder, or a postgresql:// URL (pgvector; see --table)."
)
@_table_option
@model_options
@click.option("--ann", is_flag=True, help="Also build an HNSW graph (FAISS) for approximate search.")
@click.option("--quantization", type=click.Choice(["int8", "binary"]), help="Also build a quantised scan.")
@click.option("--metric", type=click.Choice(["cosine", "dot"]), default="cosine", show_default=True)
@click.option("--hnsw-m", default=32, show_default=True, type=click.IntRange(min=4), help="HNSW links per node.")
@click.option("--ef-construction", default=128, show_default=True, type=click.IntRange(min=8))
@click.option("--ef-search", default=64, show_default=True, type=click.IntRange(min=1), help="HNSW search breadth.")
@click.option("--overwrite", is_flag=True, help="Replace an index already at --out (never a folder of other files).")
@click.option(
    "--truncate-dim",
    type=click.IntRange(min=1),
    help="Keep the first N dimensions of each vector (Matryoshka models); recorded: add and search use it too.",
)
@click.option(
    "--auto",
    is_flag=True,
    help="Choose --chunk, --bm25 and how search fuses them by scoring each way on pseudo-queries held out from "
    "CORPUS (titles and spans: --auto-query-kind; never judged queries); recorded: search applies it.",
)
@click.option(
    "--auto-queries", default=AUTO_QUERIES, show_default=True, type=click.IntRange(min=1), help="--auto: how many."
)
@auto_kind_option
@_chunk_options
@_lock_option
@_corpus_options
@prompt_options("document")
@on_interrupt("nothing was written: {out} is as it was (an index is written whole or not at all)")
@friendly_errors
def index_build(
    corpus, out, model, runtime, allow_pickle, metric, overwrite, batch_size, skip_empty, progress, prompts,
    truncate_dim, auto, auto_queries, auto_kind, **opts
):  # fmt: skip
    """Embed CORPUS (text, one per line; .jsonl, or .csv/.tsv with a header row: 'text', optional 'id' and
    'title') into an index at --out."""
    from sbert.data.corpus import read_corpus, read_titles
    from sbert.documents import MAX_WINDOWS, Chunking
    from sbert.search.auto import reusing_vectors
    from sbert.search.base import is_database_url
    from sbert.search.retrieve import build_index

    chunk, window, overlap, mode = (opts.pop(key) for key in ("chunk", "window", "overlap", "mode"))
    max_windows = opts.pop("max_windows")
    if max_windows is not None and not chunk:
        raise click.UsageError("--max-windows applies to --chunk (documents in windows); --auto keeps its default")
    bound = MAX_WINDOWS if max_windows is None else (max_windows or None)  # 0: every window
    chunking = Chunking(window, overlap, mode, max_windows=bound) if chunk else None
    table, columns = opts.pop("table"), opts.pop("columns")
    if table and not is_database_url(out):
        raise click.UsageError("--table applies to a postgresql:// URL, not to a folder")
    if is_database_url(out):
        _check_database_build(chunk, opts)
        opts = {key: opts[key] for key in (*_HNSW, "lock_timeout") if key in opts}
    else:
        from sbert.search.index import VectorIndex

        VectorIndex.check_target(out, overwrite)  # before reading and loading anything
    ids, texts = read_corpus(corpus, skip_empty=skip_empty, columns=columns, unique_ids=True)
    if not texts:
        raise click.ClickException(f"{corpus}: no texts to index")
    titles = read_titles(corpus, skip_empty=skip_empty, columns=columns)  # kept beside the text, and shown
    encoder = load_model(model, runtime, allow_pickle)
    if truncate_dim is not None:
        encoder.truncate_dim = truncate_dim
    if not is_database_url(out):
        opts["truncate_dim"] = encoder.truncate_dim  # given, or the model's own (recorded on folder indexes)
        if not auto and opts["bm25"] is None:
            opts["bm25"] = True  # the default: searched hybrid (sbert.search.retrieve.SearchOptions)
    plan = None
    with reusing_vectors(encoder) if auto else contextlib.nullcontext():  # --auto: unchanged documents once
        if auto:
            plan = _plan(encoder, Chunking(), texts, batch_size, "auto: to choose, ", whole_too=True)
            chunking, opts["bm25"], opts["search"] = _auto(
                encoder, model, (ids, texts, titles), (auto_queries, auto_kind), out, chunk, opts
            )
            chunk = chunking is not None
        elif chunking is not None:
            plan = _plan(encoder, chunking.resolved(encoder, **prompts), texts, batch_size)
        built = build_index(
            out, encoder, texts, ids, model=model, chunking=chunking, table=table, metric=metric,
            overwrite=overwrite, batch_size=batch_size, show_progress=progress, titles=titles, **prompts, **opts,
        )  # fmt: skip
    what = (
        f"{len(built.document_ids):,} documents ({len(built):,} windows{_cut(plan)})"
        if chunk
        else f"{len(built):,} texts"
    )
    click.echo(f"indexed {what} ({built.dim}-dim, {built.model}, {built.backend}) in {out}", err=True)


def _plan(encoder, chunking, texts: list[str], batch_size: int, lead: str = "", whole_too: bool = False):
    """Say, before embedding, how many windows ``chunking`` makes of ``texts``, what its bound cuts, and
    roughly how long embedding takes here (``Chunking.plan``); the plan."""
    plan = chunking.plan(encoder, texts, batch_size=batch_size)
    click.echo(f"{lead}{plan.summary(whole_too)}", err=True)
    return plan


def _cut(plan) -> str:
    """The documents a plan's bound cut, for the line that reports what was indexed."""
    if plan is None or not plan.cut:
        return ""
    from sbert.documents import count

    return f"; {count(plan.cut, 'document')} cut at {plan.max_windows} windows"


_HNSW = ("hnsw_m", "ef_construction", "ef_search")


def _auto(encoder, model, corpus: tuple, pseudo: tuple[int, str], out: str, chunk: bool, opts: dict):
    """--auto: (chunking, bm25, what the index records) chosen on pseudo-queries from the corpus; says which."""
    from sbert.data.corpus import documents_from
    from sbert.documents import Chunking
    from sbert.search.auto import choose_search, index_settings
    from sbert.search.base import is_database_url

    if chunk or opts.get("bm25") is not None:
        raise click.UsageError("--auto chooses --chunk and --bm25/--no-bm25 itself: leave them out")
    if is_database_url(out):
        raise click.UsageError("--auto applies to a folder index (an index in PostgreSQL has no windows or BM25)")
    queries, kind = pseudo
    result = choose_search(encoder, documents_from(*corpus), model=str(model), queries=queries, kind=kind)
    click.echo(result.summary(), err=True)
    return (Chunking() if result.choice.chunk else None), result.choice.hybrid, index_settings(result)


def _check_database_build(chunk: bool, opts: dict) -> None:
    """Refuse what an index in PostgreSQL does not keep (it is always HNSW, over texts)."""
    for flag, value in (("--chunk", chunk), ("--bm25", opts["bm25"]), ("--quantization", opts["quantization"])):
        if value:
            raise click.UsageError(
                f"{flag} applies to a folder index; an index in PostgreSQL holds texts, searched by HNSW"
            )


@index.command("add")
@click.argument("folder", type=INDEX)
@_table_option
@click.argument("corpus", callback=_check_corpus)
@click.option("--model", "-m", default=None, help="Must be the index's model [default: the index's model].")
@device_options
@_mixed_option
@_lock_option
@_corpus_options
@prompt_options("document")
@on_interrupt("nothing was added: the index in {folder} is as it was")
@friendly_errors
def index_add(
    folder, corpus, model, runtime, allow_pickle, allow_mixed_backend, lock_timeout, batch_size, prompts, table, **read
):
    """Embed CORPUS with the index's own model and add it to the index in FOLDER (waiting for other writers)."""
    from sbert.data.corpus import read_corpus, read_titles
    from sbert.search.retrieve import add_texts, open_index

    existing = open_index(folder, table=table, lock_timeout=lock_timeout)
    existing.check_model(model or existing.model)
    ids, texts = read_corpus(corpus, skip_empty=read["skip_empty"], columns=read["columns"], unique_ids=True)
    titles = read_titles(corpus, skip_empty=read["skip_empty"], columns=read["columns"])
    encoder = load_model(model or existing.model, runtime, allow_pickle)
    existing.fit_truncate_dim(encoder)
    existing.check_model(model or existing.model, encoder.dim)
    if existing.documents:  # split as the index's own documents were: say what that embeds
        from sbert.documents import Chunking

        _plan(encoder, Chunking.of(existing.documents), texts, batch_size)
    add_texts(
        existing, encoder, texts, ids, batch_size=batch_size, show_progress=read["progress"],
        allow_mixed_backend=allow_mixed_backend, titles=titles, **prompts,
    )  # fmt: skip
    what = f"{len(existing.document_ids):,} documents" if existing.documents else f"{len(existing):,}"
    click.echo(f"added {len(texts):,} texts; the index holds {what}", err=True)


@index.command("delete")
@click.argument("folder", type=INDEX)
@click.argument("ids", nargs=-1, required=True)
@_table_option
@_lock_option
@friendly_errors
def index_delete(folder, ids, table, lock_timeout):
    """Delete rows by id (documents, in an index built with --chunk) from the index in FOLDER (waiting for
    other writers)."""
    from sbert.search.retrieve import open_index

    existing = open_index(folder, table=table, lock_timeout=lock_timeout)
    try:
        removed = existing.delete(ids)
    except KeyError as err:
        raise click.ClickException(err.args[0]) from err
    click.echo(f"deleted {removed:,} rows; the index holds {len(existing):,}", err=True)


@index.command("info")
@click.argument("folder", type=INDEX)
@_table_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@friendly_errors
def index_info(folder, table, as_json):
    """Show what the index in FOLDER (or at a postgresql:// URL) holds."""
    from sbert.search.retrieve import open_index

    existing = open_index(folder, table=table)
    summary = {
        "rows": len(existing),
        "deleted": len(existing.deleted),
        "model": existing.model,
        "backend": existing.backend,
        "dim": existing.dim,
        "metric": existing.metric,
        "structures": existing.manifest["structures"],
        "default_method": existing.default_method(),
        "segments": len(existing.manifest["segments"]),
        "documents": existing.documents and {**existing.documents, "count": len(existing.document_ids)},
        "bm25": existing.lexical,
    }
    if as_json:
        _echo_json(summary)
        return
    for key, value in _info_rows(summary):
        click.echo(f"{key:<16}{value}")


def _info_rows(summary: dict) -> list[tuple[str, str]]:
    """``index info`` as a plain two-column table (``--json`` prints ``summary`` itself)."""

    def settings(entry: dict) -> str:
        shown = ", ".join(f"{k} {v}" for k, v in entry.items() if k != "file")
        return f" ({shown})" if shown else ""

    structures = [f"{name}{settings(entry)}" for name, entry in summary["structures"].items()]
    documents = summary["documents"]
    return [
        ("rows", f"{summary['rows']:,}" + (f" ({summary['deleted']:,} deleted)" if summary["deleted"] else "")),
        ("model", f"{summary['model']} ({summary['backend']})"),
        ("dimension", str(summary["dim"])),
        ("metric", str(summary["metric"])),
        ("search methods", ", ".join(["exact", *structures])),
        ("default method", str(summary["default_method"])),
        ("segments", str(summary["segments"])),
        ("documents", f"{documents['count']:,}{settings({k: v for k, v in documents.items() if k != 'count'})}"
         if documents else "no (texts; build with --chunk for documents)"),
        ("bm25", "yes (searched hybrid unless --dense)" if summary["bm25"]
         else "no (searched dense; build without --no-bm25 for hybrid)"),
    ]  # fmt: skip


# -- search --------------------------------------------------------------------------------------------
@click.command()
@click.argument("folder", type=INDEX)
@click.argument("queries", nargs=-1, required=True)
@_table_option
@click.option("-k", "--top-k", "k", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--model", "-m", default=None, help="Must be the index's model [default: the index's model].")
@click.option(
    "--method",
    type=click.Choice(["exact", "hnsw", "int8", "binary"]),
    help="How to search [default: hnsw if built, else the quantised scan if built, else exact].",
)
@click.option("--ef-search", type=click.IntRange(min=1), help="HNSW search breadth (more = better recall, slower).")
@click.option("--rescore", type=click.IntRange(min=1), help="int8/binary: re-score k x this many with float vectors.")
@click.option("--rerank", help="A cross-encoder (folder) that re-scores the candidates.")
@click.option(
    "--candidates",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="--rerank: results re-scored; --hybrid: results taken from each side before fusing.",
)
@click.option(
    "--hybrid/--dense",
    default=None,
    help="Fuse with BM25 results, or search the embeddings alone [default: hybrid where the index keeps BM25 "
    "(sbert index build does, unless --no-bm25), as an index built with --auto recorded, dense with --threshold "
    "or --lead].",
)
@click.option(
    "--fusion",
    type=click.Choice(["rrf", "weighted"]),
    help="--hybrid: reciprocal rank fusion, or a weighted sum of min-max normalised scores [default: weighted].",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1),
    help="--fusion weighted: the dense side's weight, 1 - alpha BM25's [default: 0.7, the one weight that gained "
    "over dense search on both SciFact and openoffice-dups: docs/search.md].",
)
@click.option(
    "--mode",
    type=click.Choice(["maxp", "mean"]),
    help="Index built with --chunk: score a document by its best window or its mean vector [default: the index's].",
)
@click.option(
    "--threshold",
    type=float,
    help="Show only hits with a cosine similarity at least this (searches dense unless --hybrid; a fused score is "
    "never compared): is this already in the index? `sbert eval --triage` chooses it.",
)
@click.option(
    "--lead",
    type=float,
    help="Show only the top hit, and only where its cosine leads the mean of hits 2-10's cosines by at least this "
    "(searches dense unless --hybrid; a fused score is never compared): is the top hit the duplicate? A value "
    "for your own collection: `sbert eval --triage` chooses it on judged duplicates.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@device_options
@_mixed_option
@prompt_options("query")
@friendly_errors
def search(folder, queries, k, model, method, ef_search, rescore, rerank, candidates, as_json, runtime, **flags):
    """Find the texts in the index at FOLDER most similar to each of QUERIES (embedded with the query prompt).

    An index built with --chunk returns documents, each with its best passage."""
    from sbert.search.retrieve import SearchOptions, open_index, search_texts

    allow_pickle = flags["allow_pickle"]
    existing = open_index(folder, table=flags["table"])
    existing.check_model(model or existing.model)
    encoder = _light_encoder(existing, queries, runtime, rerank, flags["prompts"])
    if encoder is None:  # the model itself (torch and transformers loaded: seconds)
        encoder = load_model(model or existing.model, runtime, allow_pickle)
        existing.fit_truncate_dim(encoder)
        existing.check_model(model or existing.model, encoder.dim)
    existing.check_backend(encoder.runtime, flags["allow_mixed_backend"])
    cross = None
    if rerank:
        from sbert.cross_encoder import CrossEncoder

        cross = CrossEncoder.load(rerank, device=runtime.device, allow_pickle=allow_pickle)
    options = SearchOptions(
        k,
        flags["mode"],
        flags["hybrid"],
        flags["fusion"],
        flags["alpha"],
        candidates,
        cross,
        method,
        ef_search,
        rescore,
        flags["threshold"],
        flags["lead"],
    ).for_index(existing)
    hits = search_texts(
        existing, encoder, queries, options, allow_mixed_backend=flags["allow_mixed_backend"], **flags["prompts"]
    )
    if not as_json:  # stdout is the JSON; a script reads how from the options it passed
        click.echo(_searched(options, existing.metric), err=True)
    _print_hits(queries, hits, as_json, flags["threshold"], flags["lead"], _score_label(options, existing.metric))


def _score_label(options, metric: str) -> str:
    """What ranked the hits, as each hit's line names its score: cosine, dot, fused or rerank."""
    if options.rerank is not None:
        return "rerank"
    return "fused" if options.hybrid else metric


def _searched(options, metric: str = "cosine") -> str:
    """How the hits were found, for a reader of the scores (a fused score is relative to its query, not a cosine)."""
    rerank = "; re-ranked: 'rerank' is the cross-encoder's score" if options.rerank is not None else ""
    cosine = "'cosine' is the embedding similarity, comparable across queries (what --threshold and --lead compare)"
    if not options.hybrid:
        scores = f"scores are cosine similarities{rerank}" if metric == "cosine" and not rerank else f"{cosine}{rerank}"
        return f"searched dense: {scores} (--hybrid to fuse with BM25)"
    if options.fusion == "weighted":
        how = f"weighted, alpha {options.alpha:g}"
        fused = "'fused' ranks this query's hits (min-max over its own candidates: the best is near 1 for any query)"
    else:
        how = "reciprocal rank fusion"
        fused = "'fused' ranks this query's hits (by their ranks, not how close they are)"
    return f"searched hybrid: dense + BM25, {how}; {fused}; {cosine}{rerank} (--dense for the embeddings alone)"


def _light_encoder(existing, queries, runtime, rerank, prompts: dict):
    """The torch-free query encoder of a folder index built with --backend onnx (``sbert.backends.onnx_query``),
    when nothing asks for more: no --rerank, --prompt, --device, nor a --backend/--precision unlike the index's."""
    from click.core import ParameterSource

    from sbert.search.base import is_database_url

    source = click.get_current_context().get_parameter_source
    chosen = any(source(name) not in (None, ParameterSource.DEFAULT) for name in ("backend", "precision"))
    if chosen and f"{runtime.backend}/{runtime.precision}" != existing.manifest.get("backend"):
        return None
    if rerank or runtime.device or any(v is not None for v in prompts.values()) or is_database_url(existing.path):
        return None
    from sbert.backends.onnx_query import light_query_encoder

    light = light_query_encoder(existing)
    return light if light is not None and light.accepts(queries) else None


def _print_hits(
    queries, hits, as_json: bool, threshold: float | None = None, lead: float | None = None, label: str = "cosine"
) -> None:
    """Each query's hits, each score named (``label``: what ranked them; the cosine beside any other); a
    document's hit shows its best passage (and, in JSON, the passage's span)."""
    if as_json:
        _echo_json(
            [
                {
                    "query": q,
                    "hits": [h.as_json() for h in found],
                }
                for q, found in zip(queries, hits, strict=True)
            ]
        )
        return
    for query, found in zip(queries, hits, strict=True):
        click.echo(f"query: {query}")
        if not found and lead is not None:
            under = f", or scores under {threshold:g}" if threshold is not None else ""
            click.echo(
                f"      no hit stands out: the top one leads hits 2-10 by less than {lead:g}{under} (not clearly a "
                "duplicate; lower --lead, or leave it out to see the hits)"
            )
        elif not found and threshold is not None:
            click.echo(
                f"      no hit has a cosine of {threshold:g} or more: nothing like it is indexed (lower --threshold)"
            )
        for rank, hit in enumerate(found, 1):
            where = f" (chars {hit.span[0]}-{hit.span[1]})" if hit.span else ""
            if hit.lead is not None:
                where += f" (leads hits 2-10 by {hit.lead:.4f})" if math.isfinite(hit.lead) else " (the only hit)"
            scores = f"{label} {hit.score:.4f}"
            if label != "cosine" and hit.cosine is not None:
                scores += f"  cosine {hit.cosine:.4f}"
            head = f"{rank:>4}. {scores}  "
            if not hit.title:
                click.echo(f"{head}[{hit.id}]{where} {_clip(hit.text)}")
                continue
            click.echo(f"{head}[{hit.id}]{where} {_clip(hit.title)}")
            click.echo(f"{'':>{len(head)}}{_clip(_body(hit))}")


def _body(hit) -> str | None:
    """A hit's text shown under its title: without the title the text begins with (read_corpus puts it there)."""
    text = hit.text or ""
    return text[len(hit.title) + 1 :] if hit.title and text.startswith(hit.title + " ") else hit.text


# -- mining and clustering ---------------------------------------------------------------------------
def _read_and_embed(source, model, runtime, allow_pickle, batch_size, skip_empty, progress, columns):
    from sbert.data.corpus import read_corpus

    ids, texts = read_corpus(source, skip_empty=skip_empty, columns=columns, unique_ids=True)
    if not texts:
        raise click.ClickException(f"{source}: no texts")
    encoder = load_model(model, runtime, allow_pickle)
    return ids or [str(i) for i in range(len(texts))], texts, _embed(encoder, texts, batch_size, progress)


@click.command()
@click.argument("source", metavar="FILE", callback=_check_corpus)
@model_options
@click.option("--top-k", default=100, show_default=True, type=click.IntRange(min=1), help="Partners kept per text.")
@click.option("--max-pairs", default=500_000, show_default=True, type=click.IntRange(min=1))
@click.option("--threshold", type=float, help="Keep pairs with cosine similarity at least this.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0), help="Pairs printed (0 = all).")
@click.option("--json", "as_json", is_flag=True, help="Print all pairs as JSON.")
@_corpus_options
@friendly_errors
def mine(source, model, runtime, allow_pickle, top_k, max_pairs, threshold, limit, as_json, **read):
    """Paraphrase mining: the most similar pairs of texts in FILE (text lines; .jsonl, .csv/.tsv with 'text')."""
    from sbert.search.mining import paraphrase_mining

    ids, texts, embeddings = _read_and_embed(source, model, runtime, allow_pickle, **read)
    pairs = paraphrase_mining(embeddings, top_k=top_k, max_pairs=max_pairs, threshold=threshold)
    if as_json:
        _echo_json(
            [
                {"score": p.score, "id_a": ids[p.i], "id_b": ids[p.j], "text_a": texts[p.i], "text_b": texts[p.j]}
                for p in pairs
            ]
        )
        return
    for p in pairs[: limit or None]:
        click.echo(f"{p.score:.4f}  [{ids[p.i]}] {_clip(texts[p.i], 60)}  <->  [{ids[p.j]}] {_clip(texts[p.j], 60)}")
    click.echo(f"{len(pairs):,} pairs{f' (first {limit} shown)' if limit and len(pairs) > limit else ''}", err=True)
    if not pairs and threshold is not None and len(texts) > 1:
        best = paraphrase_mining(embeddings, top_k=1, max_pairs=1)
        click.echo(
            f"hint: no pair reaches --threshold {threshold:g}; the most similar pair scores {best[0].score:.4f}: "
            "lower --threshold (or leave it out) to see pairs",
            err=True,
        )


@click.command()
@click.argument("source", metavar="FILE", callback=_check_corpus)
@model_options
@click.option(
    "--method", type=click.Choice(["agglomerative", "kmeans", "community"]), default="community", show_default=True
)
@click.option("--threshold", type=float, help="Cosine similarity: agglomerative [0.5], community [0.75].")
@click.option("--k", "k", type=click.IntRange(min=1), help="kmeans: number of clusters (required).")
@click.option("--min-size", default=10, show_default=True, type=click.IntRange(min=1), help="community: min size.")
@click.option("--linkage", type=click.Choice(["average", "complete", "single"]), default="average", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int, help="kmeans: random seed.")
@click.option(
    "--limit",
    default=10,
    show_default=True,
    type=click.IntRange(min=0),
    help="Clusters printed, and texts printed per cluster (0 = all; --json prints all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the clusters as JSON.")
@_corpus_options
@friendly_errors
def cluster(
    source, model, runtime, allow_pickle, method, threshold, k, min_size, linkage, seed, limit, as_json, **read
):
    """Group the texts in FILE by meaning (text lines; .jsonl, .csv/.tsv with 'text')."""
    from sbert.search import cluster as clustering

    if method == "kmeans" and k is None:
        raise click.UsageError("--method kmeans needs --k")
    ids, texts, embeddings = _read_and_embed(source, model, runtime, allow_pickle, **read)
    if method == "agglomerative":
        labels = clustering.agglomerative(embeddings, 0.5 if threshold is None else threshold, linkage)
    elif method == "kmeans":
        labels = clustering.kmeans(embeddings, k, seed)
    else:
        labels = clustering.community_detection(embeddings, 0.75 if threshold is None else threshold, min_size)
    groups = clustering.clusters(labels)
    if as_json:
        _echo_json(
            {
                "method": method,
                "clusters": [[{"id": ids[r], "text": texts[r]} for r in group] for group in groups],
                "unclustered": [ids[r] for r in range(len(texts)) if labels[r] < 0],
            }
        )
        return
    for number, group in enumerate(groups[: limit or None]):
        click.echo(f"cluster {number} ({len(group)} texts)")
        for row in group[: limit or None]:
            click.echo(f"    [{ids[row]}] {_clip(texts[row])}")
        if limit and len(group) > limit:
            click.echo(f"    ... {len(group) - limit:,} more")
    unclustered = int((labels < 0).sum())
    hidden = len(groups) - limit if limit and len(groups) > limit else 0
    note = f" ({hidden:,} more not shown: --limit 0 shows all, --json prints all)" if hidden else ""
    click.echo(f"{len(groups):,} clusters; {unclustered:,} texts in none{note}", err=True)
    if not groups and method == "community":
        click.echo(
            f"hint: no group of at least --min-size {min_size} texts has cosine similarity "
            f"{0.75 if threshold is None else threshold:g} or more to its centre; lower --min-size (there are "
            f"{len(texts):,} texts) or --threshold",
            err=True,
        )
