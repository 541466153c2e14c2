"""Ways to run an encoder's inference: plain torch, or ONNX Runtime (``onnx.py``); and the torch-free query
encoder that ``sbert search`` uses on an index built with the ONNX backend (``onnx_query.py``).

``BACKENDS`` is the one table of them: each backend's precisions (the first is the default) and how to
make its runner from an encoder (``runner(encoder, precision, cache_dir)``; a runner turns padded or
packed features into sentence vectors, see ``sbert.pipeline``). ``Encoder.use_backend``, ``sbert.load``
and the CLI's ``--backend``/``--precision`` read it. Adding a backend: one module here with its runner,
and one ``BACKENDS`` entry. Nothing heavy is imported until a runner is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Backend:
    """One backend: its ``precisions`` (the first is the default), its ``runner`` factory, a line of help."""

    precisions: tuple[str, ...]
    runner: Callable[[Any, str, str | Path | None], Any]
    help: str


def _torch(encoder: Any, precision: str, cache_dir: str | Path | None) -> Any:
    return encoder.torch_runner(precision)


def _onnx(encoder: Any, precision: str, cache_dir: str | Path | None) -> Any:
    from sbert.backends.onnx import OnnxBackend

    return OnnxBackend(encoder.export_source(), precision, cache_dir)


BACKENDS: dict[str, Backend] = {
    "torch": Backend(("fp32", "bf16"), _torch, "PyTorch (training and token output always use it)"),
    "onnx": Backend(("fp32", "int8"), _onnx, "ONNX Runtime on the CPU, the export cached beside the model"),
}
ALIASES = {"onnx-int8": ("onnx", "int8")}  # the CLI's shorthands: name -> (backend, precision)
PRECISIONS = tuple(dict.fromkeys(p for b in BACKENDS.values() for p in b.precisions))


def backend(name: str, precision: str | None = None) -> Backend:
    """The backend called ``name``, checked to run at ``precision`` (None: any); ValueError naming the choices."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {name!r}")
    found = BACKENDS[name]
    if precision is not None and precision not in found.precisions:
        raise ValueError(f"{name} precision must be one of {', '.join(map(repr, found.precisions))}, got {precision!r}")
    return found


def runtime_of(name: str, precision: str | None = None) -> tuple[str, str]:
    """(backend, precision) for a CLI ``--backend`` (an alias such as ``onnx-int8`` included) and ``--precision``."""
    name, implied = ALIASES.get(name, (name, None))
    return name, precision or implied or backend(name).precisions[0]
