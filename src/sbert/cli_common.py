"""What every ``sbert`` command shares: model options, loading, and one-line errors."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

import click

MODEL_HELP = "Model name ('default' = all-MiniLM-L6-v2) or path to a local model folder."


def friendly_errors(func: Callable) -> Callable:
    """Turn sbert's own errors and bad-input errors into a one-line message and exit status 1."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        from sbert.errors import SbertError

        try:
            return func(*args, **kwargs)
        except (SbertError, ValueError, TypeError) as err:
            raise click.ClickException(str(err)) from err

    return wrapper


def load_model(model: str, device: str | None, allow_pickle: bool):
    import sbert

    return sbert.load(model, device=device, allow_pickle=allow_pickle)


def device_options(func: Callable) -> Callable:
    func = click.option("--allow-pickle", is_flag=True, help="Allow pytorch_model.bin weights (can run code).")(func)
    return click.option("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if present).")(func)


def model_options(func: Callable) -> Callable:
    func = device_options(func)
    return click.option("--model", "-m", default="default", show_default=True, help=MODEL_HELP)(func)
