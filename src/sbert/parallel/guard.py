"""Spawned worker processes re-import the main script: refuse to start them from an unguarded one."""

from __future__ import annotations

import ast
import multiprocessing
import sys
from pathlib import Path
from types import FrameType

from sbert.errors import SbertError


class MainGuardError(SbertError, RuntimeError):
    """Worker processes would be started from a script's top level, outside ``if __name__ == "__main__":``."""


def _message(where: str) -> str:
    return (
        f"{where}: starts worker processes from the script's top level; the 'spawn' start method re-imports the "
        "script in each worker, which would start workers again. Put the call under "
        "'if __name__ == \"__main__\":' (see the multiprocessing docs, 'Safe importing of main module')"
    )


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = {s.id for s in sides if isinstance(s, ast.Name)}
    values = {s.value for s in sides if isinstance(s, ast.Constant)}
    return names == {"__name__"} and values == {"__main__"}


def _guarded(source: str, line: int) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # cannot tell: let multiprocessing's own check speak
    return any(
        isinstance(node, ast.If) and _is_main_test(node.test) and node.lineno <= line <= (node.end_lineno or line)
        for node in ast.walk(tree)
    )


def check_main_guard() -> None:
    """Raise ``MainGuardError`` if worker processes started now would re-run the caller's script."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise MainGuardError(_message("this worker process's main script"))
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    file = getattr(main, "__file__", None)
    if main is None or file is None or (spec_name is not None and spec_name.split(".")[-1] == "__main__"):
        return  # interactive, -c, or `python -m package`: spawn does not re-run it
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return
    try:
        source = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    if not _guarded(source, frame.f_lineno):
        raise MainGuardError(_message(f"{file}, line {frame.f_lineno}"))
