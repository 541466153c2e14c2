"""The ``sbert`` command: argument parsing and printing only; the work is the library's."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path

import click

MODEL_HELP = "Model name ('default' = all-MiniLM-L6-v2) or path to a local model folder."


def _friendly_errors(func: Callable) -> Callable:
    """Turn sbert's own errors and bad-input errors into a one-line message and exit status 1."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        from sbert.errors import SbertError

        try:
            return func(*args, **kwargs)
        except (SbertError, ValueError, TypeError) as err:
            raise click.ClickException(str(err)) from err

    return wrapper


def _load(model: str, device: str | None, allow_pickle: bool):
    import sbert

    return sbert.load(model, device=device, allow_pickle=allow_pickle)


def _model_options(func: Callable) -> Callable:
    func = click.option(
        "--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code)."
    )(func)
    func = click.option("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if present).")(
        func
    )
    return click.option("--model", "-m", default="default", show_default=True, help=MODEL_HELP)(func)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sbert")
def main() -> None:
    """Sentence-BERT sentence embeddings: encode, compare, inspect. Never downloads anything."""


@main.command()
@click.argument("source", default="-", metavar="[FILE|-]")
@_model_options
@click.option(
    "--out", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Output file (.npy or .jsonl)."
)
@click.option(
    "--format", "fmt", type=click.Choice(["npy", "jsonl"]), help="Output format (default: from --out)."
)
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--normalize", is_flag=True, help="Scale each embedding to unit length.")
@click.option("--max-seq-length", type=click.IntRange(min=2), help="Truncate texts to this many tokens.")
@click.option("--skip-empty", is_flag=True, help="Skip empty lines instead of failing on them.")
@click.option(
    "--progress/--no-progress", default=None, help="Progress bar (default: on a terminal, long inputs)."
)
@_friendly_errors
def encode(
    source, model, device, allow_pickle, out, fmt, batch_size, normalize, max_seq_length, skip_empty, progress
) -> None:
    """Embed FILE (one text per line, UTF-8; '-' or nothing = standard input)."""
    from sbert.atomic import atomic_file
    from sbert.data.lines import read_lines

    fmt = fmt or ("npy" if out is not None and out.suffix == ".npy" else "jsonl")
    if fmt == "npy" and out is None:
        raise click.UsageError("--format npy needs --out FILE.npy")
    texts = read_lines(source, skip_empty=skip_empty)
    encoder = _load(model, device, allow_pickle)
    if max_seq_length:
        encoder.max_seq_length = max_seq_length
    embeddings = encoder.encode(texts, batch_size=batch_size, normalize=normalize, show_progress=progress)
    if fmt == "npy":
        import numpy as np

        with atomic_file(out, "wb") as handle:
            np.save(handle, embeddings)
    else:
        lines = (
            json.dumps({"text": t, "embedding": e.tolist()}, ensure_ascii=False) + "\n"
            for t, e in zip(texts, embeddings, strict=True)
        )
        if out is None:
            sys.stdout.writelines(lines)
        else:
            with atomic_file(out, "w", encoding="utf-8") as handle:
                handle.writelines(lines)
    if out is not None:
        click.echo(f"wrote {len(texts)} embeddings of dimension {encoder.dim} to {out}", err=True)


@main.command()
@click.argument("texts", nargs=-1, required=True)
@_model_options
@click.option(
    "--function",
    "-f",
    "function",
    default=None,
    type=click.Choice(["cosine", "dot", "euclidean", "manhattan"]),
    help="Similarity function (default: the model's own, usually cosine).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the matrix as JSON.")
@_friendly_errors
def similarity(texts, model, device, allow_pickle, function, as_json) -> None:
    """Print the similarity matrix of TEXTS (two or more)."""
    from sbert import similarity as sim

    if len(texts) < 2:
        raise click.UsageError("give at least two texts to compare")
    encoder = _load(model, device, allow_pickle)
    embeddings = encoder.encode(list(texts))
    matrix = sim.get(function or encoder.similarity_fn_name)(embeddings, embeddings)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "texts": list(texts),
                    "function": function or encoder.similarity_fn_name,
                    "matrix": matrix.round(6).tolist(),
                }
            )
        )
        return
    for i, text in enumerate(texts, start=1):
        click.echo(f"[{i}] {text}")
    click.echo("      " + "".join(f"{f'[{j}]':>9}" for j in range(1, len(texts) + 1)))
    for i, row in enumerate(matrix, start=1):
        click.echo(f"{f'[{i}]':<6}" + "".join(f"{v:9.4f}" for v in row))


@main.command()
@click.argument("model", default="default")
@click.option("--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_friendly_errors
def info(model, allow_pickle, as_json) -> None:
    """Show a model's modules, dimension and maximum sequence length."""
    summary = _load(model, "cpu", allow_pickle).describe()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    for key, value in summary.items():
        if key == "modules":
            click.echo("modules:")
            for i, name in enumerate(value):
                click.echo(f"  {i}: {name}")
        else:
            click.echo(f"{key}: {value:,}" if isinstance(value, int) else f"{key}: {value}")


if __name__ == "__main__":
    main()
