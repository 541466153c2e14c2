"""Smaller and faster models: ``sbert distill``, a static model distilled from a transformer model
(``sbert.static.distill``), and ``sbert rotate``, a model whose first coordinates are its best truncation
(``sbert.static.rotate``)."""

from __future__ import annotations

from pathlib import Path

import click

from sbert.cli.common import CORPUS_HELP, MODEL_HELP, column_options, friendly_errors

_OVERWRITE = click.option("--overwrite", is_flag=True, help="Replace a model already at --out (refused otherwise).")


@click.command(
    help="Distil a static model from MODEL (model2vec's method): much faster, less accurate. The folder "
    "written loads in sbert, sentence-transformers and model2vec. MODEL: " + MODEL_HELP
)
@click.argument("model", default="default", metavar="[MODEL]")
@click.option("--out", "-o", required=True, type=click.Path(path_type=Path), help="Folder for the static model.")
@click.option(
    "--vocabulary",
    "corpus",
    type=click.Path(path_type=Path),
    help="A corpus (a BEIR folder, or a file as `sbert index build` reads it: JSON lines, CSV/TSV with a header "
    "row, one text per line): its words the tokenizer splits apart are added whole (identifiers, product names).",
)
@column_options
@click.option(
    "--dim",
    type=click.IntRange(min=0),
    default=256,
    show_default=True,
    help="Dimensions kept by PCA, at most the model's width (0: the model's own).",
)
@click.option("--min-count", type=int, default=2, show_default=True, help="Times a corpus word must occur.")
@click.option("--max-words", type=int, default=20_000, show_default=True, help="Most corpus words added.")
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if present).")
@click.option("--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code).")
@_OVERWRITE
@friendly_errors
def distill(model, out, corpus, columns, dim, min_count, max_words, device, allow_pickle, overwrite) -> None:
    from sbert.static.distill import distill_model

    summary = distill_model(
        model,
        out,
        corpus=corpus,
        dim=dim or None,
        min_count=min_count,
        max_words=max_words,
        device=device,
        allow_pickle=allow_pickle,
        columns=columns,
        overwrite=overwrite,
    )
    added = f", {summary['added']:,} words added from the corpus" if corpus else ""
    click.echo(f"distilled {summary['vocabulary']:,} tokens{added} to {summary['dim']} dimensions: {summary['out']}")


@click.command(
    help="Rotate MODEL onto the principal axes of its vectors of CORPUS's documents, so that cutting its "
    "vectors (--truncate-dim here, in `index build`, `encode`) keeps the directions in which your documents "
    "differ most. No training, no labels; at full width every cosine is unchanged (a rotation). The folder "
    "written loads in sbert and sentence-transformers. MODEL: " + MODEL_HELP
)
@click.argument("model", default="default", metavar="[MODEL]")
@click.option(
    "--corpus",
    required=True,
    type=click.Path(path_type=Path),
    help=CORPUS_HELP,
)
@column_options
@click.option("--out", "-o", required=True, type=click.Path(path_type=Path), help="Folder for the rotated model.")
@click.option(
    "--truncate-dim", type=int, default=None, help="Also make the model cut its vectors to this width by default."
)
@click.option("--max-texts", type=int, default=50_000, show_default=True, help="Documents embedded (drawn at random).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Which documents, when there are more.")
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if present).")
@click.option("--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@_OVERWRITE
@friendly_errors
def rotate(
    model, corpus, columns, out, truncate_dim, max_texts, batch_size, seed, device, allow_pickle, no_progress, overwrite
) -> None:
    from sbert.static.rotate import rotate_model

    summary = rotate_model(
        model,
        corpus,
        out,
        max_texts=max_texts,
        truncate_dim=truncate_dim,
        batch_size=batch_size,
        seed=seed,
        device=device,
        allow_pickle=allow_pickle,
        show_progress=False if no_progress else None,
        columns=columns,
        overwrite=overwrite,
    )
    click.echo(f"rotated onto the principal axes of {summary['texts']:,} documents of {summary['corpus']}")
    for width, (plain, turned) in summary["kept"].items():
        click.echo(
            f"  first {width} of {summary['width']} coordinates: {plain:.1%} of the variance before, {turned:.1%} after"
        )
    click.echo(summary["out"])
