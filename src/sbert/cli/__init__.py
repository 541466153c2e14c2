"""The ``sbert`` command: argument parsing and printing only; the work is the library's.

One module per family of commands: ``embeddings`` (encode, similarity, info), ``training`` (train,
eval), ``indexing`` (index build, add, delete, info), ``searching`` (search, mine, cluster), ``collection``
(make-collection), ``service`` (serve),
``static`` (distill, rotate), ``adapters`` (merge, and the ``--lora`` options of adapt and train); ``common``
holds the options and error handling they share.
"""

from __future__ import annotations

import sys
import warnings
from typing import TextIO

import click

from sbert.cli.adapt import adapt
from sbert.cli.adapters import merge
from sbert.cli.collection import make_collection
from sbert.cli.embeddings import encode, info, similarity
from sbert.cli.indexing import index
from sbert.cli.negatives import mine_negatives
from sbert.cli.plot import plot
from sbert.cli.searching import cluster, mine, search
from sbert.cli.service import serve
from sbert.cli.static import distill, rotate
from sbert.cli.training import evaluate, train

__all__ = ["main", "run"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sbert")
def main() -> None:
    """Sentence-BERT sentence embeddings: encode, compare, train, evaluate, search, serve.

    Models are local folders or names of models that installed packages ship: sbert never downloads
    anything. Every command that runs a model takes --model, --device and --allow-pickle.
    """


for _command in (
    encode,
    similarity,
    train,
    adapt,
    merge,
    evaluate,
    info,
    index,
    search,
    mine,
    mine_negatives,
    make_collection,
    cluster,
    serve,
    plot,
    distill,
    rotate,
):
    main.add_command(_command)


def run() -> None:
    """The ``sbert`` program (console script and ``python -m sbert``): ``main``, with Python warnings shown as
    the command's own lines. (Not done in ``main`` itself: a program or test that calls it keeps its own.)"""
    warnings.showwarning = show_warning
    main()


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning as one line, ``warning: ...`` as the commands' own (Python's form names a line inside click,
    the caller of every command, and shows its source). ``-W`` and ``PYTHONWARNINGS`` still choose which."""
    kind = "" if category is UserWarning else f" ({category.__name__})"
    click.echo(f"warning{kind}: {message}", file=file if file is not None else sys.stderr)
