"""``sbert search``, ``mine`` and ``cluster``: thin shells over the library."""

from __future__ import annotations

import math

import click

from sbert.cli.common import (
    device_options,
    formats_doc,
    friendly_errors,
    load_model,
    model_options,
)
from sbert.cli.embeddings import prompt_options
from sbert.cli.retrieval_options import (
    INDEX,
    check_corpus,
    clip,
    corpus_options,
    echo_json,
    embed,
    mixed_option,
    table_option,
)


# -- search --------------------------------------------------------------------------------------------
@click.command()
@click.argument("folder", type=INDEX)
@click.argument("queries", nargs=-1, required=True)
@table_option
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
@mixed_option
@prompt_options("query")
@friendly_errors
def search(
    folder, queries, table, k, model, method, ef_search, rescore, rerank, candidates, hybrid, fusion, alpha, mode,
    threshold, lead, as_json, runtime, allow_pickle, allow_mixed_backend, prompts,
):  # fmt: skip
    """Find the texts in the index at FOLDER most similar to each of QUERIES (embedded with the query prompt).

    An index built with --chunk returns documents, each with its best passage."""
    from sbert.search.searcher import open_searcher

    chosen = _chosen("backend", "precision")  # else the index's light query path may answer, where it has one
    searcher = open_searcher(
        folder, model=model, table=table, backend=runtime.backend if chosen else None,
        precision=runtime.precision if chosen else None, device=runtime.device, allow_pickle=allow_pickle,
        rerank=rerank, allow_mixed_backend=allow_mixed_backend,
        prompts_given=any(v is not None for v in prompts.values()), queries=queries,
    )  # fmt: skip
    options = searcher.options(
        k=k, mode=mode, hybrid=hybrid, fusion=fusion, alpha=alpha, candidates=candidates, method=method,
        ef_search=ef_search, rescore=rescore, threshold=threshold, lead=lead,
    )  # fmt: skip
    hits = searcher.search(queries, options, allow_mixed_backend=allow_mixed_backend, **prompts)
    metric = searcher.index.metric
    if not as_json:  # stdout is the JSON; a script reads how from the options it passed
        click.echo(_searched(options, metric), err=True)
    _print_hits(queries, hits, as_json, threshold, lead, _score_label(options, metric))


def _chosen(*names: str) -> bool:
    """Whether any of the options ``names`` was given on the command line (not left at its default)."""
    from click.core import ParameterSource

    source = click.get_current_context().get_parameter_source
    return any(source(name) not in (None, ParameterSource.DEFAULT) for name in names)


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


def _print_hits(
    queries, hits, as_json: bool, threshold: float | None = None, lead: float | None = None, label: str = "cosine"
) -> None:
    """Each query's hits, each score named (``label``: what ranked them; the cosine beside any other); a
    document's hit shows its best passage (and, in JSON, the passage's span)."""
    if as_json:
        echo_json(
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
                click.echo(f"{head}[{hit.id}]{where} {clip(hit.text)}")
                continue
            click.echo(f"{head}[{hit.id}]{where} {clip(hit.title)}")
            click.echo(f"{'':>{len(head)}}{clip(_body(hit))}")


def _body(hit) -> str | None:
    """A hit's text shown under its title: without the title its text begins with (an index keeps the text it
    embedded and searches: ``sbert.data.beir.joined``)."""
    text = hit.text or ""
    return text[len(hit.title) + 1 :] if hit.title and text.startswith(hit.title + " ") else hit.text


# -- mining and clustering ---------------------------------------------------------------------------
def _read_and_embed(source, model, runtime, allow_pickle, batch_size, skip_empty, progress, columns):
    from sbert.data.corpus import read_corpus

    corpus = read_corpus(source, skip_empty=skip_empty, columns=columns, unique_ids=True)
    ids, texts = corpus.ids, corpus.joined()
    if not texts:
        raise click.ClickException(f"{source}: no texts")
    encoder = load_model(model, runtime, allow_pickle)
    return ids or [str(i) for i in range(len(texts))], texts, embed(encoder, texts, batch_size, progress)


@click.command()
@click.argument("source", metavar="FILE", callback=check_corpus)
@model_options
@click.option("--top-k", default=100, show_default=True, type=click.IntRange(min=1), help="Partners kept per text.")
@click.option("--max-pairs", default=500_000, show_default=True, type=click.IntRange(min=1))
@click.option("--threshold", type=float, help="Keep pairs with cosine similarity at least this.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0), help="Pairs printed (0 = all).")
@click.option("--json", "as_json", is_flag=True, help="Print all pairs as JSON.")
@corpus_options
@friendly_errors
@formats_doc
def mine(source, model, runtime, allow_pickle, top_k, max_pairs, threshold, limit, as_json, **read):
    """Paraphrase mining: the most similar pairs of texts in FILE ({formats})."""
    from sbert.search.mining import paraphrase_mining

    ids, texts, embeddings = _read_and_embed(source, model, runtime, allow_pickle, **read)
    pairs = paraphrase_mining(embeddings, top_k=top_k, max_pairs=max_pairs, threshold=threshold)
    if as_json:
        echo_json(
            [
                {"score": p.score, "id_a": ids[p.i], "id_b": ids[p.j], "text_a": texts[p.i], "text_b": texts[p.j]}
                for p in pairs
            ]
        )
        return
    for p in pairs[: limit or None]:
        click.echo(f"{p.score:.4f}  [{ids[p.i]}] {clip(texts[p.i], 60)}  <->  [{ids[p.j]}] {clip(texts[p.j], 60)}")
    click.echo(f"{len(pairs):,} pairs{f' (first {limit} shown)' if limit and len(pairs) > limit else ''}", err=True)
    if not pairs and threshold is not None and len(texts) > 1:
        best = paraphrase_mining(embeddings, top_k=1, max_pairs=1)
        click.echo(
            f"hint: no pair reaches --threshold {threshold:g}; the most similar pair scores {best[0].score:.4f}: "
            "lower --threshold (or leave it out) to see pairs",
            err=True,
        )


@click.command()
@click.argument("source", metavar="FILE", callback=check_corpus)
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
@corpus_options
@friendly_errors
@formats_doc
def cluster(
    source, model, runtime, allow_pickle, method, threshold, k, min_size, linkage, seed, limit, as_json, **read
):
    """Group the texts in FILE by meaning ({formats})."""
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
        echo_json(
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
            click.echo(f"    [{ids[row]}] {clip(texts[row])}")
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
