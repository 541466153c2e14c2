"""``sbert index build``, ``add``, ``delete`` and ``info``: thin shells over ``sbert.search.retrieve``."""

from __future__ import annotations

import click

from sbert.cli.common import (
    auto_kind_option,
    device_options,
    formats_doc,
    friendly_errors,
    load_model,
    model_options,
    on_interrupt,
)
from sbert.cli.embeddings import prompt_options
from sbert.cli.retrieval_options import (
    INDEX,
    check_corpus,
    chunk_options,
    corpus_options,
    echo_json,
    lock_option,
    mixed_option,
    table_option,
)
from sbert.search.auto import QUERIES as AUTO_QUERIES


# -- index ---------------------------------------------------------------------------------------------
@click.group()
def index() -> None:
    """Build and change a persistent vector index (embeddings, ids and texts in a folder).

    The index records the model, backend and precision it was built with: `add` and `search` embed with
    that model (--model, when given, must name it) and refuse another precision unless
    --allow-mixed-backend; `delete` and `info` embed nothing and take no model.
    """


@index.command("build")
@click.argument("corpus", metavar="CORPUS", callback=check_corpus)
@click.option(
    "--out", "-o", "--db", "out", required=True, help="Index folder, or a postgresql:// URL (pgvector; see --table)."
)
@table_option
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
@chunk_options
@lock_option
@corpus_options
@prompt_options("document")
@on_interrupt("nothing was written: {out} is as it was (an index is written whole or not at all)")
@friendly_errors
@formats_doc
def index_build(
    corpus, out, model, runtime, allow_pickle, metric, overwrite, batch_size, skip_empty, progress, prompts,
    truncate_dim, auto, auto_queries, auto_kind, **opts
):  # fmt: skip
    """Embed CORPUS into an index at --out. CORPUS: {formats}; a record's 'text', and its 'id' and 'title'
    where it has them (--text-column, --id-column, --title-column)."""
    from sbert.data.corpus import read_corpus
    from sbert.search.index.homes import is_database_url
    from sbert.windows import MAX_WINDOWS, Chunking

    chunk, window, overlap, mode = (opts.pop(key) for key in ("chunk", "window", "overlap", "mode"))
    max_windows = opts.pop("max_windows")
    if max_windows is not None and not chunk:
        raise click.UsageError("--max-windows applies to --chunk (documents in windows); --auto keeps its default")
    bound = MAX_WINDOWS if max_windows is None else (max_windows or None)  # 0: every window
    chunking = Chunking(window, overlap, mode, max_windows=bound) if chunk else None
    table, columns = opts.pop("table"), opts.pop("columns")
    _check_target(out, table, overwrite, auto, chunk, opts)
    if is_database_url(out):
        opts = {key: opts[key] for key in (*_HNSW, "lock_timeout") if key in opts}
    elif opts["bm25"] is None:
        del opts["bm25"]  # the library's default (sbert.search.retrieve.build_index)
    records = read_corpus(corpus, skip_empty=skip_empty, columns=columns, unique_ids=True)
    if not records.texts:
        raise click.ClickException(f"{corpus}: no texts to index")
    encoder = load_model(model, runtime, allow_pickle)
    if truncate_dim is not None:
        encoder.truncate_dim = truncate_dim
    common = {"model": model, "table": table, "metric": metric, "overwrite": overwrite, "batch_size": batch_size,
              "show_progress": progress, "titles": records.titles, **prompts, **opts}  # fmt: skip
    if auto:
        from sbert.search.auto import build_auto

        plan = _plan(encoder, Chunking(), records.joined(), batch_size, "auto: to choose, ", whole_too=True)
        pseudo = {"queries": auto_queries, "kind": auto_kind, "report": _say}
        built, result = build_auto(out, encoder, records.texts, records.ids, **pseudo, **common)
        chunk = result.choice.chunk
    else:
        from sbert.search.retrieve import build_index

        resolved = None if chunking is None else chunking.resolved(encoder, **prompts)
        plan = None if resolved is None else _plan(encoder, resolved, records.joined(), batch_size)
        built = build_index(out, encoder, records.texts, records.ids, chunking=chunking, **common)
    what = (
        f"{len(built.document_ids):,} documents ({len(built):,} windows{_cut(plan)})"
        if chunk
        else f"{len(built):,} texts"
    )
    click.echo(f"indexed {what} ({built.dim}-dim, {built.model}, {built.backend}) in {out}", err=True)


def _say(line: str) -> None:
    click.echo(line, err=True)


def _check_target(out: str, table: str | None, overwrite: bool, auto: bool, chunk: bool, opts: dict) -> None:
    """Refuse, before reading and loading anything, options that contradict each other or the target."""
    from sbert.search.index.homes import is_database_url

    if table and not is_database_url(out):
        raise click.UsageError("--table applies to a postgresql:// URL, not to a folder")
    if auto and (chunk or opts.get("bm25") is not None):
        raise click.UsageError("--auto chooses --chunk and --bm25/--no-bm25 itself: leave them out")
    if is_database_url(out):
        _check_database_build(chunk, opts)
        if auto:
            raise click.UsageError("--auto applies to a folder index (an index in PostgreSQL has no windows or BM25)")
        return
    from sbert.search.index.folder import VectorIndex

    VectorIndex.check_target(out, overwrite)


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
    from sbert.windows import count

    return f"; {count(plan.cut, 'document')} cut at {plan.max_windows} windows"


_HNSW = ("hnsw_m", "ef_construction", "ef_search")


def _check_database_build(chunk: bool, opts: dict) -> None:
    """Refuse what an index in PostgreSQL does not keep (it is always HNSW, over texts)."""
    for flag, value in (("--chunk", chunk), ("--bm25", opts["bm25"]), ("--quantization", opts["quantization"])):
        if value:
            raise click.UsageError(
                f"{flag} applies to a folder index; an index in PostgreSQL holds texts, searched by HNSW"
            )


@index.command("add")
@click.argument("folder", type=INDEX)
@table_option
@click.argument("corpus", callback=check_corpus)
@click.option("--model", "-m", default=None, help="Must be the index's model [default: the index's model].")
@device_options
@mixed_option
@lock_option
@corpus_options
@prompt_options("document")
@on_interrupt("nothing was added: the index in {folder} is as it was")
@friendly_errors
def index_add(
    folder, corpus, model, runtime, allow_pickle, allow_mixed_backend, lock_timeout, batch_size, prompts, table, **read
):
    """Embed CORPUS with the index's own model and add it to the index in FOLDER (waiting for other writers)."""
    from sbert.data.corpus import read_corpus
    from sbert.search.retrieve import add_texts, open_index
    from sbert.search.searcher import search_model

    existing = open_index(folder, table=table, lock_timeout=lock_timeout)
    model = search_model(existing, model)
    records = read_corpus(corpus, skip_empty=read["skip_empty"], columns=read["columns"], unique_ids=True)
    encoder = load_model(model, runtime, allow_pickle)
    existing.fit_truncate_dim(encoder)
    existing.check_model(model, encoder.dim)
    if existing.documents:  # split as the index's own documents were: say what that embeds
        from sbert.windows import Chunking

        _plan(encoder, Chunking.of(existing.documents), records.joined(), batch_size)
    add_texts(
        existing, encoder, records.texts, records.ids, batch_size=batch_size, show_progress=read["progress"],
        allow_mixed_backend=allow_mixed_backend, titles=records.titles, **prompts,
    )  # fmt: skip
    what = f"{len(existing.document_ids):,} documents" if existing.documents else f"{len(existing):,}"
    click.echo(f"added {len(records):,} texts; the index holds {what}", err=True)


@index.command("delete")
@click.argument("folder", type=INDEX)
@click.argument("ids", nargs=-1, required=True)
@table_option
@lock_option
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
@table_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@friendly_errors
def index_info(folder, table, as_json):
    """Show what the index in FOLDER (or at a postgresql:// URL) holds."""
    from sbert.search.retrieve import index_summary, open_index

    summary = index_summary(open_index(folder, table=table))
    if as_json:
        echo_json(summary)
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
