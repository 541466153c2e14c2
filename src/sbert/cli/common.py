"""What every ``sbert`` command shares: model options, loading, and one-line errors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps

import click

MODEL_HELP = "Model name ('default' = all-MiniLM-L6-v2) or path to a local model folder."


# The library's advice names Python arguments; on the command line, name what the user can type.
_CLI_TERMS = (
    (
        "; pass allow_empty=True to encode it anyway",
        "; give a non-empty text (when reading a file, --skip-empty skips empty lines)",
    ),
)


def in_cli_terms(message: str) -> str:
    for library, cli in _CLI_TERMS:
        message = message.replace(library, cli)
    return message


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


def device_options(func: Callable) -> Callable:
    """--device, --backend, --precision (folded into one ``runtime`` argument) and --allow-pickle."""

    @wraps(func)
    def wrapper(*args, device, backend, precision, **kwargs):
        precision = precision or ("int8" if backend == "onnx-int8" else "fp32")
        backend = "onnx" if backend == "onnx-int8" else backend
        return func(*args, runtime=Runtime(device, backend, precision), **kwargs)

    wrapper = click.option("--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code).")(
        wrapper
    )
    wrapper = click.option(
        "--precision",
        type=click.Choice(["fp32", "bf16", "int8"]),
        help="torch: fp32 or bf16; onnx: fp32 or int8 [default: fp32].",
    )(wrapper)
    wrapper = click.option(
        "--backend",
        type=click.Choice(["torch", "onnx", "onnx-int8"]),
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
