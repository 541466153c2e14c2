"""LoRA adapters on the command line: the ``--lora`` options ``sbert adapt`` and ``sbert train`` share, and
``sbert merge`` (a thin shell over ``sbert.adapters``)."""

from __future__ import annotations

from collections.abc import Callable

import click

from sbert.adapters import DEFAULT_TARGETS, LoraSettings
from sbert.cli.common import friendly_errors

_DEFAULTS = LoraSettings()


def lora_options(command: Callable) -> Callable:
    """``--lora``, ``--lora-rank``, ``--lora-alpha`` and ``--lora-targets`` (None where not given)."""
    options = [
        click.option(
            "--lora",
            is_flag=True,
            default=None,
            help="Train a small LoRA adapter instead of every weight, and save only it (a few MB naming its base "
            "model; sbert.load and sentence-transformers rebuild the whole model from it; sbert merge folds it in).",
        ),
        click.option(
            "--lora-rank",
            type=click.IntRange(min=1),
            default=None,
            help=f"--lora: the rank of each low-rank update [default: {_DEFAULTS.rank}].",
        ),
        click.option(
            "--lora-alpha",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help=f"--lora: updates are scaled by alpha / rank [default: {_DEFAULTS.alpha:g}].",
        ),
        click.option(
            "--lora-targets",
            metavar="NAMES",
            default=None,
            help="--lora: the linear layers adapted, by the end of their names "
            f"[default: {','.join(DEFAULT_TARGETS)}: attention and feed-forward of a BERT-family model].",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.command(
    help="Write the adapter model at FOLDER (a LoRA adapter over its base model) as an ordinary whole model to "
    "--out, the adapter folded into the base's weights: the same embeddings, loadable where adapters are not."
)
@click.argument("folder", metavar="FOLDER")
@click.option("--out", "-o", required=True, help="Output folder (a sentence-transformers model).")
@click.option("--overwrite", is_flag=True, help="Replace a model already at --out (refused otherwise).")
@friendly_errors
def merge(folder: str, out: str, overwrite: bool) -> None:
    from sbert.adapters import merge_folder

    saved = merge_folder(folder, out, overwrite=overwrite)
    click.echo(f"merged {folder} into a whole model at {saved}", err=True)
