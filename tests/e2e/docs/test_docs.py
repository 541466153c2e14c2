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

pytestmark = pytest.mark.slow  # runs every documented block and command

ROOT = Path(__file__).resolve().parents[3]
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


def _bash_lines(path: Path) -> list[str]:
    """The command lines of the bash blocks of ``path``, backslash continuations joined, comments kept."""
    return [line.strip() for _, code in blocks(path, "bash") for line in code.replace("\\\n", " ").splitlines()]


def _without_quiet(line: str) -> str:
    return re.sub(r"\s+", " ", line.replace(" -q ", " ").replace(" -qq ", " ")).strip()


README = ROOT / "README.md"
ACTIVATE = "source .venv/bin/activate"


def test_readme_set_up_and_activation_are_the_lines_ci_runs():
    """The README's two set-up commands are what .ci/run runs (its -q aside), and the activation line it gives
    for every later example names the environment that set-up creates."""
    ci = [_without_quiet(line) for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    setup, tests, activate = (_bash_lines(README)[i] for i in range(3))
    assert _without_quiet(setup) in ci, f"README set-up differs from .ci/run: {setup}"
    assert _without_quiet(tests) in ci, f"README test command differs from .ci/run: {tests}"
    assert "python3 -m venv .venv" in setup and activate.split("#")[0].strip() == ACTIVATE
    later = [line for line in _bash_lines(README)[3:] if line.startswith(".venv/bin/")]
    assert not later, f"after the activation line the README uses bare names: {later}"


def _command_paths() -> set[tuple[str, ...]]:
    """Each documented ``sbert`` command as its path of (sub)command names: ("index", "build"), ("encode",)."""
    paths = set()
    for path in DOCS:
        for words in _commands(path):
            command, names = main, []
            for word in words:
                if isinstance(command, click.Group) and word in command.commands:
                    command, names = command.commands[word], [*names, word]
            paths.add(tuple(names))
    return paths


def test_every_documented_command_runs_from_a_fresh_shell_after_the_activation(tmp_path):
    """A new shell (no inherited PATH or environment) that runs the README's activation line finds ``sbert``,
    ``python`` and ``pip`` in the environment, and each documented command answers ``--help``.

    The environment is the checkout's ``.venv`` where set-up made one (CI), else the one running these tests;
    PYTHONPATH points at this checkout's source so that the commands are this checkout's."""
    venv = ROOT / ".venv" if (ROOT / ".venv" / "bin" / "activate").is_file() else Path(sys.prefix)
    if not (venv / "bin" / "activate").is_file():
        pytest.skip(f"{venv}: not a virtual environment with bin/activate")
    activate = _bash_lines(README)[2].split("#")[0].strip().replace(".venv", shlex.quote(str(venv)))
    checks = [f"sbert {' '.join(p)} --help >/dev/null || echo 'FAILED: sbert {' '.join(p)}'" for p in _command_paths()]
    script = "\n".join([activate, "command -v sbert python pip", *sorted(checks)])
    fresh = {"HOME": str(tmp_path), "PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script], cwd=ROOT, env=fresh, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0 and "FAILED" not in done.stdout, done.stdout + done.stderr
    found = done.stdout.splitlines()[:3]
    assert found == [str(venv / "bin" / name) for name in ("sbert", "python", "pip")], found
    assert len(checks) >= 15  # encode, similarity, info, train, eval, serve, index ..., search, mine, cluster, plot ...


_LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize(
    "path",
    [*DOCS, ROOT / "tests" / "README.md", ROOT / "benchmarks" / "results" / "README.md"],
    ids=lambda p: p.name,
)
def test_every_local_link_leads_to_a_file_that_exists(path):
    if not path.is_file():
        pytest.fail(f"{path.relative_to(ROOT)} is missing")
    text = path.read_text(encoding="utf-8")
    missing = [link for link in _LINK.findall(text) if not (path.parent / link).exists()]
    assert not missing, f"{path.relative_to(ROOT)} links to files that do not exist: {missing}"


_PROCESS_WORDS = re.compile(r"\bthe issue\b|\bissue \d+|\blent\b|\bgpu session\b|\bhelpers?\b|\bsessions\b", re.I)
_FIGURE = re.compile(r"\b[1-9][0-9]\.[0-9]{2}\b")  # a measured figure (64.51): it goes stale in code


def test_the_readme_and_guides_stay_short_and_speak_of_the_product():
    """README <= 250 lines, each guide <= 400; no words about how sbert was made in them or in the source,
    and no measured figure in the source (a default is explained by its reason, figures live in
    benchmarks/results/)."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250
    for path in DOCS[1:]:
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 400, f"{path.name} is over 400 lines"
    source = sorted((ROOT / "src" / "sbert").rglob("*.py"))
    for path in [*DOCS, *source]:
        found = _PROCESS_WORDS.search(path.read_text(encoding="utf-8"))
        assert not found, f"{path.relative_to(ROOT)}: {found.group(0)!r}"
    for path in source:
        found = _FIGURE.search(path.read_text(encoding="utf-8"))
        assert not found, f"{path.relative_to(ROOT)}: a figure {found.group(0)} (link benchmarks/results instead)"
