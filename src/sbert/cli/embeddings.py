"""``sbert encode``, ``similarity`` and ``info``: embeddings of texts, and what a model is."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial, wraps
from pathlib import Path

import click

from sbert.cli.common import (
    MODEL_HELP,
    Runtime,
    column_options,
    formats_doc,
    friendly_errors,
    load_model,
    model_options,
    one_model,
)
from sbert.data.corpus import read_corpus
from sbert.embeddings_io import embedding_meta as embedding_meta  # kept importable from here
from sbert.embeddings_io import meta_path as meta_path
from sbert.progress import ENCODE_FROM
from sbert.progress import HELP as PROGRESS_HELP

_PROMPT_DEFAULTS = {
    "text": "the model's default_prompt_name, if it has one",
    "query": "the model's 'query' prompt, if it has one",
    "document": "the model's 'document' prompt, if it has one",
}


def prompt_options(role: str) -> Callable[[Callable], Callable]:
    """--prompt-name and --prompt, folded into one ``prompts`` argument (keywords of ``encode``/``encode_query``/
    ``encode_document``). ``role`` ("text", "query", "document") says which prompt applies when neither is given."""

    def decorate(func: Callable) -> Callable:
        @wraps(func)
        def wrapper(*args, prompt_name, prompt, **kwargs):
            return func(*args, prompts={"prompt_name": prompt_name, "prompt": prompt}, **kwargs)

        wrapper = click.option(
            "--prompt",
            metavar="TEXT",
            help="Text put before each input (wins over --prompt-name; '' = none).",
        )(wrapper)
        return click.option(
            "--prompt-name",
            metavar="NAME",
            help=f"Put the model's prompt NAME before each input (config_sentence_transformers.json) "
            f"[default: {_PROMPT_DEFAULTS[role]}].",
        )(wrapper)

    return decorate


@click.command()
@click.argument("source", default="-", metavar="[FILE|-]")
@model_options
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    help="Output file, .npy or .jsonl (a FILE.meta.json beside it records the model, backend and precision); "
    "with --processes or an existing folder: a folder of shards (docs/scale.md).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["npy", "jsonl"]), help="Output format (default: from --out's extension)."
)
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    help="Also cap each batch at this many padded tokens (with a larger --batch-size: big batches of "
    "short texts, small batches of long ones).",
)
@click.option("--normalize", is_flag=True, help="Scale each embedding to unit length.")
@click.option("--max-seq-length", type=click.IntRange(min=2), help="Truncate texts to this many tokens.")
@click.option("--skip-empty", is_flag=True, help="Skip empty lines instead of failing on them.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help=f"{PROGRESS_HELP} [default: for {ENCODE_FROM:,} texts or more].",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    help="Encode with N worker processes into --out DIR: .npy and Parquet shards and a manifest.json, "
    "streamed (the input need not fit in memory). With --engine ray: N Ray actors (default 2).",
)
@click.option(
    "--engine",
    type=click.Choice(["processes", "ray"]),
    default="processes",
    show_default=True,
    help="--out DIR: local worker processes, or a Ray cluster through Ray Data (pip install 'sbert[ray]'; "
    "docs/scale.md).",
)
@click.option(
    "--address",
    metavar="ADDRESS",
    help="--engine ray: the cluster ('auto' = the one `ray start` runs on this node, ray://HEAD:10001 = a "
    "remote one; default: a new local Ray).",
)
@click.option(
    "--shard-size", default=10_000, show_default=True, type=click.IntRange(min=1), help="Texts per shard (--out DIR)."
)
@click.option(
    "--resume/--no-resume",
    default=True,
    show_default=True,
    help="--out DIR: keep the shards an earlier run with the same settings finished (--no-resume: start over).",
)
@column_options
@prompt_options("text")
@friendly_errors
@formats_doc
def encode(
    source,
    model,
    runtime,
    allow_pickle,
    out,
    fmt,
    batch_size,
    max_tokens,
    normalize,
    max_seq_length,
    skip_empty,
    progress,
    processes,
    engine,
    address,
    shard_size,
    resume,
    prompts,
    columns,
) -> None:
    """Embed FILE (nothing = standard input): {formats}; a record's title, where it has one, goes before its
    text."""
    from sbert.embeddings_io import embedding_meta, format_of, write_embeddings

    if processes is not None or engine == "ray" or address is not None or (out is not None and out.is_dir()):
        run = (processes, shard_size, resume, skip_empty, progress, engine, address)
        encoding = dict(
            batch_size=batch_size, max_tokens=max_tokens, normalize=normalize, max_seq_length=max_seq_length
        )
        options = {**encoding, **prompts, "columns": columns}
        return _encode_to_folder(source, (model, runtime, allow_pickle), out, fmt, run, options)
    try:
        fmt = fmt or format_of(out)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    if fmt == "npy" and out is None:
        raise click.UsageError("--format npy needs --out FILE.npy")
    texts = read_corpus(source, skip_empty=skip_empty, columns=columns).joined()
    encoder = load_model(model, runtime, allow_pickle)
    if max_seq_length:
        encoder.max_seq_length = max_seq_length
    prompt = encoder.resolve_prompt(**prompts)
    from sbert.progress import report

    shown = progress if progress is not None else len(texts) >= ENCODE_FROM  # as the bar below is
    report(f"encode: {len(texts):,} texts with {model}, batch {batch_size}", shown)
    embeddings = encoder.encode(
        texts, batch_size=batch_size, max_tokens=max_tokens, normalize=normalize, show_progress=progress, prompt=prompt
    )
    meta = embedding_meta(model, encoder, len(texts), normalize, fmt, prompt)
    write_embeddings(texts, embeddings, fmt, out, meta)
    if out is not None:
        click.echo(f"wrote {len(texts)} embeddings of dimension {encoder.dim} to {out}", err=True)


def _encode_to_folder(source, loading: tuple, out, fmt, run: tuple, options: dict) -> None:
    """``encode --processes N --out DIR``: sbert.parallel's resumable shard folder. ``loading``: model, runtime,
    allow_pickle; ``run``: processes, shard_size, resume, skip_empty, progress, engine, address; ``options``:
    EncodeSpec's, and the corpus ``columns``. ``--engine ray`` runs it on a Ray cluster with ``processes``
    actors (default 2)."""
    from sbert.parallel import encode_to_shards

    model, runtime, allow_pickle = loading
    processes, shard_size, resume, skip_empty, progress, engine, address = run
    if address is not None and engine != "ray":
        raise click.UsageError("--address names a Ray cluster: use it with --engine ray")
    if engine == "ray":
        from sbert.parallel.ray_engine import encode_with_ray

        write_shards = partial(encode_with_ray, address=address, num_actors=processes or 2)
    else:
        write_shards = partial(encode_to_shards, processes=processes or 1)
    if out is None:
        raise click.UsageError("--processes writes a folder of shards: give it with --out DIR")
    if fmt is not None or (not out.is_dir() and out.suffix.lower() in (".npy", ".jsonl", ".ndjson")):
        raise click.UsageError(
            f"--out {out}: --processes writes a folder of shards (.npy and Parquet, with a manifest.json), "
            "not one .npy or .jsonl file: give a folder"
        )
    result = write_shards(
        model,
        source,
        out,
        shard_size=shard_size,
        resume=resume,
        skip_empty=skip_empty,
        show_progress=progress,
        backend=runtime.backend,
        precision=runtime.precision,
        device=runtime.device,
        allow_pickle=allow_pickle,
        **options,
    )
    kept = f" ({len(result.skipped)} finished earlier, kept)" if result.skipped else ""
    click.echo(
        f"wrote {result.rows} embeddings in {result.shards} shards to {out}: {len(result.written)} encoded now{kept}",
        err=True,
    )


@click.command()
@click.argument("texts", nargs=-1, required=True)
@model_options
@click.option(
    "--function",
    "-f",
    "function",
    default=None,
    type=click.Choice(["cosine", "dot", "euclidean", "manhattan"]),
    help="Similarity function (default: the model's own, usually cosine).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the matrix as JSON.")
@prompt_options("text")
@friendly_errors
def similarity(texts, model, runtime, allow_pickle, function, as_json, prompts) -> None:
    """Print the similarity matrix of TEXTS (two or more)."""
    from sbert import similarity as sim

    if len(texts) < 2:
        raise click.UsageError("give at least two texts to compare")
    empty = [i for i, text in enumerate(texts, start=1) if not text.strip()]
    if empty:
        raise click.UsageError(f"text {empty[0]} is empty; give non-empty texts to compare")
    encoder = load_model(model, runtime, allow_pickle)
    embeddings = encoder.encode(list(texts), **prompts)
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


@click.command()
@click.argument("model_arg", metavar="[MODEL]", required=False)
@click.option("--model", "-m", default=None, help=MODEL_HELP + " Same as MODEL. [default: default]")
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cpu).")
@click.option("--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@friendly_errors
def info(model_arg, model, device, allow_pickle, as_json) -> None:
    """Show a model's modules, dimension, maximum sequence length and prompts."""
    summary = load_model(one_model(model_arg, model), Runtime(device or "cpu"), allow_pickle).describe()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    for key, value in summary.items():
        if key == "modules":
            click.echo("modules:")
            for i, name in enumerate(value):
                click.echo(f"  {i}: {name}")
        elif key == "prompts":
            click.echo("prompts:")
            for name, text in value.items():
                click.echo(f"  {name}: {text!r}")
        else:
            click.echo(f"{key}: {value:,}" if isinstance(value, int) else f"{key}: {value}")
