"""``sbert plot``: pictures of embeddings (map, heatmap) and of runs (training, retrieval), as thin shells over
``sbert.plot``. The picture's format follows --out: .png, .svg, .pdf (matplotlib) or .html (plotly, hover text)."""

from __future__ import annotations

from pathlib import Path

import click

from sbert.cli.common import column_options, formats_doc, friendly_errors, load_model, model_options
from sbert.data.corpus import field_extensions


def _out_option(func):
    return click.option(
        "--out",
        "-o",
        required=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="The picture: .png, .svg or .pdf, or .html (interactive, hover shows the texts).",
    )(func)


def _backend(out: Path, *more: str) -> str:
    """The plotting library --out needs; refused now, before any work, if it (or ``more``) is not installed."""
    import importlib.util

    from sbert.plot.output import backend_for

    try:
        backend = backend_for(out)
    except ValueError as err:
        raise click.UsageError(f"--out {err}") from None
    missing = [m for m in (backend, *more) if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(f"{out}: needs {', '.join(missing)}: pip install -e '.[plot]' (in sbert's checkout)")
    return backend


def _save(figure, out: Path, what: str) -> None:
    from sbert.plot import save

    save(figure, out)
    click.echo(f"wrote {what} to {out}", err=True)


@click.group()
def plot() -> None:
    """Pictures: a map of texts, a similarity heatmap, training curves, retrieval curves.

    The format follows --out: PNG, SVG or PDF (matplotlib) or interactive HTML (plotly; plotly.js is
    inside the file, so it opens without a network). Needs `pip install -e '.[plot]'`.
    """


def _map_colouring(source, count, labels, label_field, clusters, skip_empty, columns) -> list[str] | None:
    """The labels the map is coloured by (--labels or --label-field), checked against the texts."""
    from sbert.plot.inputs import read_label_field, read_labels

    if sum(bool(x) for x in (labels, label_field, clusters)) > 1:
        raise click.UsageError("give one of --labels, --label-field and --clusters: a map has one colouring")
    if labels:
        return read_labels(labels, count, source)
    if label_field:
        from sbert.data.corpus import CORPUS_FORMATS, corpus_format, field_extensions

        if str(source).endswith(".npy") or not CORPUS_FORMATS[corpus_format(source)].fields:
            raise click.UsageError(
                f"--label-field reads a field of a {field_extensions()} TEXTS file; for a text file use --labels"
            )
        return read_label_field(source, label_field, skip_empty, columns)
    return None


def _map_inputs(source: str, texts_file: str | None, skip_empty: bool, columns):
    """(texts or None, embeddings or None, their model's name): TEXTS as a corpus, or as a .npy of embeddings."""
    from sbert.data.corpus import read_corpus
    from sbert.plot.inputs import read_embeddings

    if str(source).endswith(".npy"):
        embeddings, model = read_embeddings(source)
        texts = read_corpus(texts_file, skip_empty=skip_empty, columns=columns).joined() if texts_file else None
        return texts, embeddings, model
    if texts_file:
        raise click.UsageError("--texts goes with a .npy TEXTS file of embeddings; TEXTS itself holds the texts")
    texts = read_corpus(source, skip_empty=skip_empty, columns=columns).joined()
    if not texts:
        raise click.ClickException(f"{source}: no texts")
    return texts, None, None


@plot.command("map")
@click.argument("source", metavar="TEXTS")
@_out_option
@click.option("--method", type=click.Choice(["umap", "pca", "tsne"]), default="umap", show_default=True)
@click.option("--labels", help="A file of labels, one per line of TEXTS, to colour the points by.")
@click.option("--label-field", help=f"A {field_extensions()} TEXTS file: colour by this field of each record.")
@click.option("--clusters", type=click.Choice(["community", "kmeans", "agglomerative"]), help="Colour by clusters.")
@click.option("--k", "k", default=8, show_default=True, type=click.IntRange(min=1), help="--clusters kmeans: k.")
@click.option("--threshold", type=float, help="--clusters: cosine similarity (community 0.75, agglomerative 0.5).")
@click.option("--min-size", default=10, show_default=True, type=click.IntRange(min=1), help="community: min size.")
@click.option("--max-points", default=10_000, show_default=True, type=click.IntRange(min=1), help="Sample above.")
@click.option("--seed", default=0, show_default=True, type=int, help="The sample's and the projection's seed.")
@click.option("--texts", "texts_file", help="A .npy TEXTS file of embeddings: the texts (hover), line by line.")
@model_options
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--skip-empty", is_flag=True, help="Skip empty lines instead of failing on them.")
@column_options
@friendly_errors
@formats_doc
def plot_map(source, out, labels, label_field, clusters, k, threshold, min_size, texts_file, model, runtime, **opts):
    """A 2-D map of TEXTS ({formats}; or a .npy of embeddings from `sbert encode`)."""
    import sbert.plot
    from sbert.plot.projection import FEW_FOR_UMAP

    backend = _backend(out, *(["umap"] if opts["method"] == "umap" else []))
    columns = opts.pop("columns")
    texts, embeddings, named = _map_inputs(source, texts_file, opts["skip_empty"], columns)
    count = len(texts) if embeddings is None else len(embeddings)
    colouring = _map_colouring(source, count, labels, label_field, clusters, opts["skip_empty"], columns)
    options = {"k": k, "min_size": min_size} | ({"threshold": threshold} if threshold is not None else {})
    if opts["method"] == "umap" and min(count, opts["max_points"]) < FEW_FOR_UMAP:
        click.echo(
            f"warning: {count} points: a UMAP map means little below ~{FEW_FOR_UMAP}; --method pca shows a few "
            "texts plainly",
            err=True,
        )
    if embeddings is None:
        encoder = load_model(model, runtime, opts["allow_pickle"])
        data, model_used, hover = texts, encoder, None
    else:
        data, model_used, hover = embeddings, named, texts
    figure = sbert.plot.map(
        data,
        colouring,
        texts=hover,
        model=model_used,
        method=opts["method"],
        clusters=clusters,
        cluster_options=options,
        max_points=opts["max_points"],
        seed=opts["seed"],
        backend=backend,
        batch_size=opts["batch_size"],
    )
    _save(figure, out, f"a {opts['method']} map of {count:,} points")


@plot.command("heatmap")
@click.argument("texts", nargs=-1)
@_out_option
@click.option("--file", "texts_file", help="Read the texts from this file (one per line) instead.")
@click.option("--width", default=40, show_default=True, type=click.IntRange(min=5), help="Label characters.")
@model_options
@friendly_errors
def plot_heatmap(texts, out, texts_file, width, model, runtime, allow_pickle):
    """The cosine similarity matrix of TEXTS (2 to 60), values in the cells."""
    import sbert.plot
    from sbert.data.corpus import read_corpus

    backend = _backend(out)
    if texts and texts_file:
        raise click.UsageError("give TEXTS or --file, not both")
    texts = read_corpus(texts_file, skip_empty=True).joined() if texts_file else list(texts)
    if len(texts) < 2:
        raise click.UsageError("a heatmap needs at least two texts")
    encoder = load_model(model, runtime, allow_pickle)
    _save(
        sbert.plot.heatmap(texts, model=encoder, backend=backend, width=width),
        out,
        f"a {len(texts)}x{len(texts)} heatmap",
    )


@plot.command("training")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...")
@_out_option
@click.option("--name", "names", multiple=True, help="A name per RUN_DIR for the legend [default: folder names].")
@friendly_errors
def plot_training(run_dirs, out, names):
    """Loss, learning rate and dev score against steps of each RUN_DIR (OUT.train/ of `sbert train`, with its
    log.jsonl; or the model folder OUT), several runs overlaid."""
    import sbert.plot

    if names and len(names) != len(run_dirs):
        raise click.UsageError(f"{len(names)} --name for {len(run_dirs)} runs; give one per RUN_DIR or none")
    figure = sbert.plot.training(run_dirs, names=names or None, backend=_backend(out))
    _save(figure, out, f"the curves of {len(run_dirs)} run{'s' if len(run_dirs) > 1 else ''}")


@plot.command("retrieval")
@click.argument("results", nargs=-1, required=True, metavar="RESULTS...")
@_out_option
@click.option("--split", default="test", show_default=True, help="BEIR folders: the qrels split.")
@click.option("--top-k", default=100, show_default=True, type=click.IntRange(min=1), help="BEIR folders: depth.")
@click.option("--skip-empty-documents", is_flag=True, help="BEIR folders: drop documents with no title or text.")
@click.option("--save-rankings", type=click.Path(dir_okay=False, path_type=Path), help="Write the rankings JSON.")
@model_options
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@friendly_errors
def plot_retrieval(results, out, split, top_k, skip_empty_documents, save_rankings, model, runtime, **opts):
    """Recall@k curves and relevant vs non-relevant score distributions of each of RESULTS: a rankings JSON file
    (written by --save-rankings, or by sbert.plot.write_rankings), or a BEIR folder that --model ranks first."""
    import sbert.plot

    backend = _backend(out)
    missing = [r for r in results if not Path(r).exists()]
    if missing:
        raise click.UsageError(
            f"{missing[0]}: no such folder or file; expected a BEIR folder or a rankings JSON file (--save-rankings)"
        )
    folders = [r for r in results if Path(r).is_dir()]
    if save_rankings and len(folders) != 1:
        raise click.UsageError("--save-rankings writes the rankings of one BEIR folder; give exactly one")
    encoder = load_model(model, runtime, opts["allow_pickle"]) if folders else None
    runs = []
    for result in results:
        if Path(result).is_dir():
            from sbert.data.beir import read_beir

            collection = read_beir(result, split, skip_empty_documents)
            runs.append(sbert.plot.rank(encoder, collection, k=top_k, batch_size=opts["batch_size"]))
            if save_rankings:
                sbert.plot.write_rankings(runs[-1], save_rankings)
        else:
            runs.append(sbert.plot.read_rankings(result))
    _save(sbert.plot.retrieval(runs, backend=backend), out, f"the retrieval curves of {len(runs)} result(s)")
