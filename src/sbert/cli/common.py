"""What every ``sbert`` command shares: model options, loading, and one-line errors."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps

import click

from sbert.backends import ALIASES, BACKENDS, PRECISIONS, runtime_of
from sbert.data.corpus import field_extensions, formats_help

MODEL_HELP = "Model name ('default' = all-MiniLM-L6-v2) or path to a local model folder."


# The library's advice names Python arguments ("pass overwrite=True"); on the command line, name what the user
# can type ("use --overwrite"). One mechanism: ``in_cli_terms`` maps every "pass NAME=VALUE" whose NAME is an
# option of some ``sbert`` command to that option; the few whose CLI answer differs are listed here.
_CLI_TERMS = (
    (
        "; pass allow_empty=True to encode it anyway",
        "; give a non-empty text (when reading a file, --skip-empty skips empty lines)",
    ),
)
# "pass NAME=VALUE" or "with NAME=VALUE", and the "(--flag)" or "(CLI: --flag)" a message may add after it
_PASS = re.compile(r"\b(pass|with) ([a-z_][a-z0-9_]*)=(True|[^\s,;)]+)(?: \((?:CLI: )?--[a-z0-9-]+\))?")


def _option_names(command: click.Command, into: dict[str, str]) -> dict[str, str]:
    """Python name -> its long option (``allow_pickle`` -> ``--allow-pickle``), over ``command`` and its
    sub-commands; the first command to define a name decides."""
    for param in command.params:
        longs = [opt for opt in param.opts if opt.startswith("--")]
        if isinstance(param, click.Option) and param.name and longs:
            spelled = "--" + param.name.replace("_", "-")
            into.setdefault(param.name, spelled if spelled in longs else max(longs, key=len))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _option_names(sub, into)
    return into


def in_cli_terms(message: str) -> str:
    """``message`` in the words of the command line: "pass overwrite=True" -> "use --overwrite",
    "pass text_column=NAME" -> "use --text-column NAME", "with bm25=True" -> "with --bm25" (for any option
    of any ``sbert`` command; a "(--overwrite)" after it is dropped)."""
    for library, cli in _CLI_TERMS:
        message = message.replace(library, cli)
    context = click.get_current_context(silent=True)
    if context is None or not _PASS.search(message):
        return message  # walking every command's options imports them all (torch among them): only when needed
    options = _option_names(context.find_root().command, {})

    def replace(match: re.Match) -> str:
        verb, name, value = match.groups()
        if name not in options:
            return match.group(0)
        return f"{'use' if verb == 'pass' else verb} {options[name]}" + ("" if value == "True" else f" {value}")

    return _PASS.sub(replace, message)


def friendly_errors(func: Callable) -> Callable:
    """Turn sbert's own errors and bad-input errors into a one-line message and exit status 1."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        from sbert.errors import SbertError

        try:
            return func(*args, **kwargs)
        except (SbertError, ValueError, TypeError) as err:
            raise click.ClickException(in_cli_terms(str(err))) from err

    return wrapper


@dataclass(frozen=True)
class Runtime:
    """Where and how a command runs its model: device, backend and precision."""

    device: str | None = None
    backend: str = "torch"
    precision: str = "fp32"


def load_model(model: str, runtime: Runtime, allow_pickle: bool):
    import sbert

    return sbert.load(
        model,
        device=runtime.device,
        allow_pickle=allow_pickle,
        backend=runtime.backend,
        precision=runtime.precision,
    )


def auto_kind_option(func: Callable) -> Callable:
    """--auto-query-kind: which pseudo-queries ``--auto`` draws (``sbert.search.auto.KINDS``)."""
    from sbert.search.auto import KIND, KINDS

    return click.option(
        "--auto-query-kind",
        "auto_kind",
        type=click.Choice(list(KINDS)),
        default=KIND,
        show_default=True,
        help="--auto: the pseudo-queries: a document's title or a 16-word span cut out of it, one or the other "
        "by a coin (mixed), titles only (title: spans for untitled documents) or spans only.",
    )(func)


def device_options(func: Callable) -> Callable:
    """--device, --backend, --precision (folded into one ``runtime`` argument) and --allow-pickle."""

    @wraps(func)
    def wrapper(*args, device, backend, precision, **kwargs):
        backend, precision = runtime_of(backend, precision)
        return func(*args, runtime=Runtime(device, backend, precision), **kwargs)

    wrapper = click.option("--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code).")(
        wrapper
    )
    wrapper = click.option(
        "--precision",
        type=click.Choice(list(PRECISIONS)),
        help="; ".join(f"{name}: {' or '.join(b.precisions)}" for name, b in BACKENDS.items())
        + " [default: the first].",
    )(wrapper)
    wrapper = click.option(
        "--backend",
        type=click.Choice([*BACKENDS, *ALIASES]),
        default="torch",
        show_default=True,
        help="How to run the model on the CPU: torch, or ONNX Runtime (export cached beside the model).",
    )(wrapper)
    return click.option("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if present).")(wrapper)


def one_model(argument: str | None, option: str | None) -> str:
    """The model of a command that takes it as an argument (``sbert eval MODEL``) or as ``--model``."""
    if argument and option and argument != option:
        raise click.UsageError(f"two models given: {argument!r} and --model {option!r}; give one")
    return option or argument or "default"


def model_options(func: Callable) -> Callable:
    func = device_options(func)
    return click.option("--model", "-m", default="default", show_default=True, help=MODEL_HELP)(func)


CORPUS_HELP = (
    "The documents: a BEIR folder (its corpus.jsonl[.gz]), or a file as `sbert index build` reads it: "
    f"{formats_help()} (--text-column, --title-column, --id-column name the fields)."
)


def formats_doc(func: Callable) -> Callable:
    """A command whose help (its docstring) says ``{formats}``: that filled with the corpus formats there are
    (``sbert.data.corpus.CORPUS_FORMATS``). Put it last, nearest the function."""
    func.__doc__ = (func.__doc__ or "").replace("{formats}", formats_help())
    return func


def column_options(func: Callable) -> Callable:
    """--text-column, --id-column and --title-column (folded into one ``columns`` argument, a ``Columns``):
    which fields of a corpus file with fields (.jsonl, .csv, .tsv: ``CORPUS_FORMATS``) hold the texts, ids and
    titles."""

    @wraps(func)
    def wrapper(*args, text_column, id_column, title_column, **kwargs):
        from sbert.data.corpus import Columns

        return func(*args, columns=Columns(text_column, id_column, title_column), **kwargs)

    for name, default, what in (
        ("title", "title", "titles, put before the texts (where the column is present)"),
        ("id", "id", "ids (where the column is present)"),
        ("text", "text", "the texts"),
    ):
        wrapper = click.option(
            f"--{name}-column",
            default=default,
            show_default=True,
            metavar="NAME",
            help=f"A {field_extensions()} FILE: the column or field of {what}.",
        )(wrapper)
    return wrapper


def on_interrupt(message: str) -> Callable[[Callable], Callable]:
    """On Ctrl-C, say ``message`` (formatted with the command's arguments, e.g. ``{out}``) and exit 130, as a
    shell does for SIGINT: what an interrupted command kept, or that it wrote nothing."""

    def decorate(func: Callable) -> Callable:
        @wraps(func)
        def wrapper(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except KeyboardInterrupt:
                click.echo(f"\ninterrupted: {message.format(**kwargs)}", err=True)
                raise SystemExit(130) from None

        return wrapper

    return decorate
