"""``sbert index``, ``search``, ``mine`` and ``cluster``: the uses of embeddings, as thin shells over the library."""

from __future__ import annotations

import json

import click

from sbert.cli.common import device_options, friendly_errors, load_model, model_options
from sbert.cli.embeddings import prompt_options


def _embed(encoder, texts: list[str], batch_size: int, progress: bool | None):
    return encoder.encode(texts, batch_size=batch_size, show_progress=progress, on_truncation="ignore")


def _embed_documents(encoder, texts: list[str], batch_size: int, progress: bool | None, prompts: dict):
    """Texts to index, with the model's document prompt (``encode_document``) unless ``prompts`` name another."""
    return encoder.encode_document(
        texts, batch_size=batch_size, show_progress=progress, on_truncation="ignore", **prompts
    )


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


def _embed_windows(encoder, ids, texts, settings: dict, batch_size: int, progress: bool | None, prompts: dict):
    """Embed each text window by window (``sbert.documents``), each window with the document prompt (or the one
    ``prompts`` name): the windows' vectors, passages and ``Documents``."""
    from sbert.documents import Chunker, encode_documents
    from sbert.search.index import Documents

    prompt = encoder.resolve_prompt(**prompts, task="document") or ""  # each window gets it, as encode_document
    chunker = Chunker.for_encoder(encoder)
    window = settings.get("window") or chunker.max_window - len(chunker.prompt_ids(prompt))
    encoded = encode_documents(
        encoder,
        texts,
        window=window,
        overlap=settings["overlap"],
        batch_size=batch_size,
        show_progress=progress,
        prompt=prompt,
    )
    documents = Documents.of(encoded, ids, window, settings["overlap"], settings["mode"])
    return encoded.vectors, encoded.passages, documents


def _chunk_options(func):
    func = click.option(
        "--mode",
        type=click.Choice(["maxp", "mean"]),
        default="maxp",
        show_default=True,
        help="With --chunk: score a document by its best window, or by the mean of its windows' vectors.",
    )(func)
    func = click.option(
        "--overlap", default=32, show_default=True, type=click.IntRange(min=0), help="With --chunk: tokens shared."
    )(func)
    func = click.option(
        "--window", type=click.IntRange(min=1), help="With --chunk: tokens per window [default: the model's limit]."
    )(func)
    func = click.option("--bm25", is_flag=True, help="Also keep a BM25 index of the texts, for `search --hybrid`.")(
        func
    )
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
@click.argument("corpus", metavar="CORPUS")
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
@_chunk_options
@_lock_option
@_corpus_options
@prompt_options("document")
@friendly_errors
def index_build(
    corpus, out, model, runtime, allow_pickle, metric, overwrite, batch_size, skip_empty, progress, prompts,
    truncate_dim, **opts
):
    """Embed CORPUS (text, one per line; or .jsonl with 'text' and optional 'id') into an index at --out."""
    from sbert.data.corpus import read_corpus
    from sbert.search.index import VectorIndex, backend_name
    from sbert.search.pgvector import PgVectorIndex, is_database_url, split_location

    settings = {key: opts.pop(key) for key in ("chunk", "window", "overlap", "mode")}
    table = opts.pop("table")
    if table and not is_database_url(out):
        raise click.UsageError("--table applies to a postgresql:// URL, not to a folder")
    database = split_location(out, table) if is_database_url(out) else None
    if database:
        _check_database_build(settings, opts)
        PgVectorIndex.check_target(*database, overwrite)
    else:
        VectorIndex.check_target(out, overwrite)
    ids, texts = read_corpus(corpus, skip_empty=skip_empty)
    encoder = load_model(model, runtime, allow_pickle)
    if truncate_dim is not None:
        encoder.truncate_dim = truncate_dim
    if not database:
        opts["truncate_dim"] = encoder.truncate_dim  # given, or the model's own (recorded on folder indexes)
    documents = None
    if settings["chunk"]:
        ids = ids or [str(i) for i in range(len(texts))]
        embeddings, texts, documents = _embed_windows(encoder, ids, texts, settings, batch_size, progress, prompts)
        ids = None
    else:
        embeddings = _embed_documents(encoder, texts, batch_size, progress, prompts)
    if database:
        built = PgVectorIndex.build(
            database[0], embeddings, model=model, table=database[1], ids=ids, texts=texts, metric=metric,
            overwrite=overwrite, backend=backend_name(encoder), **{k: opts[k] for k in _HNSW},
        )  # fmt: skip
        click.echo(f"indexed {len(built):,} texts ({built.dim}-dim, {built.model}, {built.backend}) in {out}", err=True)
        return
    built = VectorIndex.build(
        out,
        embeddings,
        model=model,
        ids=ids,
        texts=texts,
        metric=metric,
        overwrite=overwrite,
        show_progress=progress,
        backend=backend_name(encoder),
        documents=documents,
        **opts,
    )
    what = f"{len(built.document_ids):,} documents ({len(built):,} windows)" if documents else f"{len(built):,} texts"
    click.echo(f"indexed {what} ({built.dim}-dim, {built.model}, {built.backend}) in {out}", err=True)


_HNSW = ("hnsw_m", "ef_construction", "ef_search")


def _check_database_build(settings: dict, opts: dict) -> None:
    """Refuse what an index in PostgreSQL does not keep (it is always HNSW, over texts)."""
    for flag, value in (
        ("--chunk", settings["chunk"]),
        ("--bm25", opts["bm25"]),
        ("--quantization", opts["quantization"]),
    ):
        if value:
            raise click.UsageError(
                f"{flag} applies to a folder index; an index in PostgreSQL holds texts, searched by HNSW"
            )


@index.command("add")
@click.argument("folder", type=click.Path(file_okay=False))
@_table_option
@click.argument("corpus")
@click.option("--model", "-m", default=None, help="Must be the index's model [default: the index's model].")
@device_options
@_mixed_option
@_lock_option
@_corpus_options
@prompt_options("document")
@friendly_errors
def index_add(
    folder, corpus, model, runtime, allow_pickle, allow_mixed_backend, lock_timeout, batch_size, prompts, table, **read
):
    """Embed CORPUS with the index's own model and add it to the index in FOLDER (waiting for other writers)."""
    from sbert.data.corpus import read_corpus
    from sbert.search.index import backend_name
    from sbert.search.pgvector import open_index

    existing = open_index(folder, table=table, lock_timeout=lock_timeout)
    existing.check_model(model or existing.model)
    ids, texts = read_corpus(corpus, skip_empty=read["skip_empty"])
    encoder = load_model(model or existing.model, runtime, allow_pickle)
    existing.fit_truncate_dim(encoder)
    existing.check_model(model or existing.model, encoder.dim)
    backend = backend_name(encoder)
    existing.check_backend(backend, allow_mixed_backend)  # before the costly encoding; again under the lock
    count, documents, progress = len(texts), None, read["progress"]
    if existing.documents:  # split as the index's documents were
        from sbert.search.index import next_ids

        ids = ids or next_ids(existing.document_ids, len(texts))
        embeddings, texts, documents = _embed_windows(
            encoder, ids, texts, existing.documents, batch_size, progress, prompts
        )
        ids = None
    else:
        embeddings = _embed_documents(encoder, texts, batch_size, progress, prompts)
    existing.add(
        embeddings,
        ids=ids,
        texts=texts,
        show_progress=progress,
        backend=backend,
        allow_mixed_backend=allow_mixed_backend,
        documents=documents,
    )
    what = f"{len(existing.document_ids):,} documents" if documents else f"{len(existing):,}"
    click.echo(f"added {count:,} texts; the index holds {what}", err=True)


@index.command("delete")
@click.argument("folder", type=click.Path(file_okay=False))
@click.argument("ids", nargs=-1, required=True)
@_table_option
@_lock_option
@friendly_errors
def index_delete(folder, ids, table, lock_timeout):
    """Delete rows by id (documents, in an index built with --chunk) from the index in FOLDER (waiting for
    other writers)."""
    from sbert.search.pgvector import open_index

    existing = open_index(folder, table=table, lock_timeout=lock_timeout)
    try:
        removed = existing.delete(ids)
    except KeyError as err:
        raise click.ClickException(err.args[0]) from err
    click.echo(f"deleted {removed:,} rows; the index holds {len(existing):,}", err=True)


@index.command("info")
@click.argument("folder", type=click.Path(file_okay=False))
@_table_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@friendly_errors
def index_info(folder, table, as_json):
    """Show what the index in FOLDER (or at a postgresql:// URL) holds."""
    from sbert.search.pgvector import open_index

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
    for key, value in summary.items():
        click.echo(f"{key}: {value}")


# -- search --------------------------------------------------------------------------------------------
@click.command()
@click.argument("folder", type=click.Path(file_okay=False))
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
@click.option("--hybrid", is_flag=True, help="Fuse with BM25 results (an index built with --bm25).")
@click.option(
    "--fusion",
    type=click.Choice(["rrf", "weighted"]),
    default="weighted",
    show_default=True,
    help="--hybrid: reciprocal rank fusion, or a weighted sum of min-max normalised scores.",
)
@click.option(
    "--alpha",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="--fusion weighted: the dense side's weight (1 - alpha: BM25's).",
)
@click.option(
    "--mode",
    type=click.Choice(["maxp", "mean"]),
    help="Index built with --chunk: score a document by its best window or its mean vector [default: the index's].",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@device_options
@_mixed_option
@prompt_options("query")
@friendly_errors
def search(folder, queries, k, model, method, ef_search, rescore, rerank, candidates, as_json, runtime, **flags):
    """Find the texts in the index at FOLDER most similar to each of QUERIES (embedded with the query prompt).

    An index built with --chunk returns documents, each with its best passage."""
    from sbert.search.index import Hybrid, backend_name
    from sbert.search.pgvector import open_index

    allow_pickle, allow_mixed = flags["allow_pickle"], flags["allow_mixed_backend"]
    existing = open_index(folder, table=flags["table"])
    existing.check_model(model or existing.model)
    encoder = load_model(model or existing.model, runtime, allow_pickle)
    existing.fit_truncate_dim(encoder)
    existing.check_model(model or existing.model, encoder.dim)
    backend = backend_name(encoder)
    existing.check_backend(backend, allow_mixed)
    fetch = max(k, candidates) if rerank else k
    hits = existing.search(
        encoder.encode_query(list(queries), **flags["prompts"]),
        fetch,
        method=method,
        ef_search=ef_search,
        rescore=rescore,
        backend=backend,
        allow_mixed_backend=allow_mixed,
        mode=flags["mode"],
        hybrid=Hybrid(queries, flags["fusion"], flags["alpha"], candidates=candidates) if flags["hybrid"] else None,
    )
    if rerank:
        from sbert.cross_encoder import CrossEncoder
        from sbert.search.rerank import rerank as rescore_hits

        cross = CrossEncoder.load(rerank, device=runtime.device, allow_pickle=allow_pickle)
        hits = [rescore_hits(cross, q, found, k) for q, found in zip(queries, hits, strict=True)]
    _print_hits(queries, hits, as_json)


def _print_hits(queries, hits, as_json: bool) -> None:
    """Each query's hits; a document's hit shows its best passage (and, in JSON, the passage's span)."""
    if as_json:
        _echo_json(
            [
                {"query": q, "hits": [{k: v for k, v in h._asdict().items() if k != "span" or v} for h in found]}
                for q, found in zip(queries, hits, strict=True)
            ]
        )
        return
    for query, found in zip(queries, hits, strict=True):
        click.echo(f"query: {query}")
        for rank, hit in enumerate(found, 1):
            where = f" (chars {hit.span[0]}-{hit.span[1]})" if hit.span else ""
            click.echo(f"{rank:>4}. {hit.score:.4f}  [{hit.id}]{where} {_clip(hit.text)}")


# -- mining and clustering ---------------------------------------------------------------------------
def _read_and_embed(source, model, runtime, allow_pickle, batch_size, skip_empty, progress):
    from sbert.data.corpus import read_corpus

    ids, texts = read_corpus(source, skip_empty=skip_empty)
    if not texts:
        raise click.ClickException(f"{source}: no texts")
    encoder = load_model(model, runtime, allow_pickle)
    return ids or [str(i) for i in range(len(texts))], texts, _embed(encoder, texts, batch_size, progress)


@click.command()
@click.argument("source", metavar="FILE")
@model_options
@click.option("--top-k", default=100, show_default=True, type=click.IntRange(min=1), help="Partners kept per text.")
@click.option("--max-pairs", default=500_000, show_default=True, type=click.IntRange(min=1))
@click.option("--threshold", type=float, help="Keep pairs with cosine similarity at least this.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0), help="Pairs printed (0 = all).")
@click.option("--json", "as_json", is_flag=True, help="Print all pairs as JSON.")
@_corpus_options
@friendly_errors
def mine(source, model, runtime, allow_pickle, top_k, max_pairs, threshold, limit, as_json, **read):
    """Paraphrase mining: the most similar pairs of texts in FILE (text lines, or .jsonl with 'text'/'id')."""
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


@click.command()
@click.argument("source", metavar="FILE")
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
    """Group the texts in FILE by meaning (text lines, or .jsonl with 'text'/'id')."""
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
