"""``sbert distill``: a static model distilled from a transformer model (``sbert.distill``)."""

from __future__ import annotations

from pathlib import Path

import click

from sbert.cli.common import MODEL_HELP, friendly_errors


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
    help='A corpus (one text per line, or .jsonl with "text"): its words the tokenizer splits apart are added '
    "whole (identifiers, product names).",
)
@click.option("--dim", type=int, default=256, show_default=True, help="Dimensions kept by PCA (0: the model's own).")
@click.option("--min-count", type=int, default=2, show_default=True, help="Times a corpus word must occur.")
@click.option("--max-words", type=int, default=20_000, show_default=True, help="Most corpus words added.")
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if present).")
@click.option("--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code).")
@friendly_errors
def distill(model, out, corpus, dim, min_count, max_words, device, allow_pickle) -> None:
    from sbert.distill import distill_model

    summary = distill_model(
        model,
        out,
        corpus=corpus,
        dim=dim or None,
        min_count=min_count,
        max_words=max_words,
        device=device,
        allow_pickle=allow_pickle,
    )
    added = f", {summary['added']:,} words added from the corpus" if corpus else ""
    click.echo(f"distilled {summary['vocabulary']:,} tokens{added} to {summary['dim']} dimensions: {summary['out']}")
