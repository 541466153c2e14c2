"""The README and docs/ tell the truth: their Python blocks run as written, their commands' options exist.

Python blocks of one file run in order in one namespace (as a reader goes down the page), in a
temporary working folder. A block preceded by ``<!-- doctest: server -->`` runs against a real
``sbert serve`` started here (its port put in place of 8080). A block preceded by
``<!-- doctest: skip REASON -->`` (it needs a trained model or hours of training) is only compiled
and its imports checked.
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from sbert.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"(?:<!--\s*doctest:\s*(?P<mark>[^>]*?)\s*-->\s*\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)


def blocks(path: Path, lang: str) -> list[tuple[str, str]]:
    """(marker, code) of each fenced block of ``lang`` in ``path``."""
    text = path.read_text(encoding="utf-8")
    return [(m["mark"] or "", m["code"]) for m in _BLOCK.finditer(text) if m["lang"] == lang]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _check_imports(code: str) -> None:
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), (
                    f"from {node.module} import {alias.name}"
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)


class Server:
    """``sbert serve`` on a free loopback port, started on first use and stopped at the end."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> int:
        if self.process is None:
            self.port = _free_port()
            command = [sys.executable, "-m", "sbert", "serve", "--host", "127.0.0.1", "--port", str(self.port)]
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                assert self.process.poll() is None, self.process.stderr.read().decode()
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.3)
        return self.port

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.mark.parametrize("path", [p for p in DOCS if blocks(p, "python")], ids=lambda p: p.name)
def test_python_blocks_run_as_written(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__doc_example__"}
    server = Server()
    try:
        for number, (mark, code) in enumerate(blocks(path, "python"), start=1):
            where = f"{path.name}, Python block {number}"
            if mark.startswith("skip"):
                compile(code, where, "exec")
                _check_imports(code)
                continue
            if mark == "server":
                code = code.replace("127.0.0.1:8080", f"127.0.0.1:{server.start()}")
            try:
                exec(compile(code, where, "exec"), namespace)
            except Exception as err:
                raise AssertionError(f"{where} fails: {type(err).__name__}: {err}\n{code}") from err
    finally:
        server.stop()


def _commands(path: Path) -> list[list[str]]:
    """Each ``sbert ...`` command line of the bash blocks, joined over backslash continuations."""
    found = []
    for _, code in blocks(path, "bash"):
        for line in code.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words: list[str] = []
            for token in [*lexer, ";"]:
                if token and set(token) <= set("&|;()<>"):
                    if words and (words[0] == "sbert" or words[0].endswith("/sbert")):
                        found.append(words[1:])
                    words = []
                else:
                    words.append(token)
    return found


@pytest.mark.parametrize("path", [p for p in DOCS if _commands(p)], ids=lambda p: p.name)
def test_every_documented_command_and_option_exists(path):
    for words in _commands(path):
        command: click.Command = main
        for word in words:
            if isinstance(command, click.Group) and word in command.commands:
                command = command.commands[word]
            elif isinstance(command, click.Group) and not word.startswith("-"):
                raise AssertionError(f"{path.name}: `sbert {' '.join(words)}`: no command {word!r}")
        assert not isinstance(command, click.Group), f"{path.name}: `sbert {' '.join(words)}` names no command"
        options = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
        options |= {"--help", "-h"}
        for word in words:
            name = word.split("=")[0].strip("[]")
            if name.startswith("-") and name not in ("-", "--"):
                assert name.rstrip(",") in options, f"{path.name}: `sbert {' '.join(words)}`: {name} is not an option"
