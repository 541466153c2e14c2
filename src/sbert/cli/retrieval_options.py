"""Options and small functions shared by ``sbert index`` and ``sbert search``/``mine``/``cluster``."""

from __future__ import annotations

import json

import click

from sbert.cli.common import (
    column_options,
)


def embed(encoder, texts: list[str], batch_size: int, progress: bool | None):
    return encoder.encode(texts, batch_size=batch_size, show_progress=progress, on_truncation="ignore")


class IndexLocation(click.ParamType):
    """An index: a folder (which need not exist yet: opening it says what is missing) or a postgresql:// URL;
    a file is refused at once, a corpus with the command that makes an index of it."""

    name = "folder"

    def convert(self, value, param, ctx):
        from pathlib import Path

        from sbert.search.index.homes import is_database_url

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


def check_corpus(ctx, param, value):
    """A corpus argument's format, told by its extension before anything is read or loaded (``corpus_format``)."""
    from sbert.data.corpus import corpus_format
    from sbert.errors import InputFileError

    try:
        corpus_format(value)
    except InputFileError as err:
        raise click.ClickException(str(err)) from None
    return value


def echo_json(value) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=1))


def clip(text: str | None, width: int = 100) -> str:
    text = "" if text is None else " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def lock_option(func):
    return click.option(
        "--lock-timeout",
        default=600.0,
        show_default=True,
        type=click.FloatRange(min=0),
        help="Seconds to wait for another process writing the same index.",
    )(func)


def mixed_option(func):
    return click.option(
        "--allow-mixed-backend",
        is_flag=True,
        help="Use vectors of another precision than the index's (e.g. onnx-int8 with fp32); results degrade.",
    )(func)


def chunk_options(func):
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


def table_option(func):
    return click.option(
        "--table", help="With a postgresql:// URL: the index's table [default: the URL's #fragment, else sbert_index]."
    )(func)


def corpus_options(func):
    func = column_options(func)
    func = click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal).")(func)
    func = click.option("--skip-empty", is_flag=True, help="Skip empty lines instead of failing on them.")(func)
    return click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))(func)
