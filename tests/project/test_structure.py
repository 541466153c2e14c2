"""The shape of the code (docs/architecture.md, "Rules the tests keep"): no import cycles inside sbert or
among the benchmarks, no upward imports between layers, a CLI free of library logic, no long functions
without a stated reason."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "sbert"
MAX_LINES = 60
REASON = "# long:"  # a function may be longer where a comment on its first line says why
# Debt being paid off by issue 14's redesign; each entry goes when its code is split. Nothing may join.
KNOWN_CYCLES: set[tuple[str, str]] = set()
KNOWN_LONG: set[str] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """sbert modules that ``name`` imports anywhere (top level or inside functions); a package's
    ``__init__`` is not counted as imported by its own submodules' relative imports of siblings."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("sbert"):
                found.add(target)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], _ = 1, stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node], _ = 2, stack.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_import_cycles_inside_sbert():
    modules = _modules()
    known = set(modules)
    # A package's __init__ re-exporting its submodules is not a cycle with them: drop edges into the
    # package that a module's own package __init__ gives it for free.
    graph = {
        name: {t for t in _imports(name, path, known) if not (name.startswith(t + ".") and t != "sbert")}
        for name, path in modules.items()
    }
    graph = {name: {t for t in targets if t != "sbert"} for name, targets in graph.items()}
    for a, b in KNOWN_CYCLES:
        graph[b].discard(a)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_function_over_60_lines_without_a_reason():
    long = []
    for name, path in _modules().items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                first = lines[
                    (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1 : node.body[0].lineno
                ]
                known = f"{name}.{node.name}" in KNOWN_LONG
                if size > MAX_LINES and not known and not any(REASON in line for line in first):
                    long.append(f"{name}.{node.name} ({size} lines)")
    assert not long, "functions over 60 lines without a '# long: why' comment: " + ", ".join(long)


# -- layers -------------------------------------------------------------------------------------------------
# Lowest first. A module may import modules of its own layer or below, never above: the order of
# docs/architecture.md ("Layers"). Keys are sbert's top-level modules and packages.
LAYERS: list[set[str]] = [
    {
        "errors",
        "versions",
        "arrays",
        "atomic",
        "device",
        "progress",
        "protocols",
        "distributed",
        "locks",
        "eval_mode",
        "heap",
    },
    {"data", "split_zip", "model_names", "adapter_folder", "batching", "prompts", "similarity", "token_ids"},
    {"modules", "pipeline", "backends"},
    {"encoder"},
    {
        "losses",
        "evaluation",
        "search",
        "windows",
        "cross_encoder",
        "static",
        "embeddings_io",
        "parallel",
        "adapters",
        "shared_base",
    },
    {"training", "plot"},
    {"adapt"},
    {"serve"},
    {"cli", "__main__"},
]


def _layer_of(name: str) -> int | None:
    """The layer of module ``name`` (None: the package ``sbert`` itself, a facade over every layer)."""
    parts = name.split(".")
    if len(parts) == 1:
        return None
    for number, members in enumerate(LAYERS):
        if parts[1] in members:
            return number
    raise AssertionError(f"{name}: not in any layer of test_structure.py's LAYERS; add it (and to the docs)")


def test_no_module_imports_a_higher_layer():
    modules = _modules()
    known = set(modules)
    upward = []
    for name, path in modules.items():
        mine = _layer_of(name)
        for target in _imports(name, path, known):
            theirs = _layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{name} -> {target}")
    assert not upward, "imports of a higher layer: " + ", ".join(sorted(upward))


# -- benchmarks -------------------------------------------------------------------------------------------
BENCHMARKS = SRC.parent / "benchmarks"


def _benchmark_modules() -> dict[str, Path]:
    """``benchmarks.NAME`` and ``benchmarks.lib.NAME`` -> file (the scripts and what they share)."""
    paths = [*BENCHMARKS.glob("*.py"), *(BENCHMARKS / "lib").glob("*.py"), *(BENCHMARKS / "gpu_session").glob("*.py")]
    names = {}
    for path in sorted(paths):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _benchmark_imports(path: Path, known: set[str]) -> set[str]:
    """The benchmark modules ``path`` imports (``from benchmarks.lib import x`` counts ``benchmarks.lib``, and
    ``benchmarks.lib.x`` too where that is a module), anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found & known


def test_no_import_cycles_among_the_benchmarks_and_lib_imports_no_script():
    """benchmarks/ is a package run as ``python -m benchmarks.NAME``: scripts import what they share from
    ``benchmarks.lib`` (and a few reuse another script's parts); ``benchmarks.lib`` imports no script."""
    modules = _benchmark_modules()
    graph = {name: _benchmark_imports(path, set(modules)) - {name} for name, path in modules.items()}
    graph = {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in graph.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle among benchmarks/: " + " -> ".join(cycle)
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.startswith("benchmarks.lib")
        for target in targets
        if not target.startswith("benchmarks.lib")
    )
    assert not upward, "benchmarks.lib imports a script: " + ", ".join(upward)


def test_the_benchmarks_import_each_other_as_a_package_and_leave_sys_path_alone():
    """No ``from common import ...`` (a script's own folder on sys.path) and no ``sys.path`` edits: the one
    way to run a benchmark is ``python -m benchmarks.NAME`` from the repository root."""
    stems = {path.stem for path in _benchmark_modules().values()} - {"__init__"}
    wrong = []
    for name, path in _benchmark_modules().items():
        text = path.read_text(encoding="utf-8")
        if "sys.path" in text:
            wrong.append(f"{name}: sys.path")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module in stems:
                wrong.append(f"{name}: from {node.module} import")
            elif isinstance(node, ast.Import):
                wrong += [f"{name}: import {a.name}" for a in node.names if a.name.partition(".")[0] in stems]
    assert not wrong, "benchmarks/ not imported as a package: " + ", ".join(wrong)


def _defined_names(path: Path) -> tuple[set[str], bool]:
    """The names a module defines or imports at its top level, and whether it has a module ``__getattr__``
    (a lazy package: any name may be there)."""
    names, lazy = set(), False
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            lazy |= node.name == "__getattr__"
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.If | ast.Try):  # names defined under a guard
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            names |= {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    return names, lazy


def test_every_name_a_benchmark_imports_from_sbert_is_there():
    """A benchmark imports sbert's names inside its functions too, where ``--help`` never reaches: a name
    sbert renamed or moved is caught here, not an hour into a run."""
    modules = _modules()
    missing = []
    for name, path in _benchmark_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").partition(".")[0] == "sbert"):
                continue
            if node.module not in modules:
                missing.append(f"{name}: {node.module}")
                continue
            defined, lazy = _defined_names(modules[node.module])
            for alias in node.names:
                if alias.name not in defined and not lazy and f"{node.module}.{alias.name}" not in modules:
                    missing.append(f"{name}: {node.module}.{alias.name}")
    assert not missing, "benchmarks import what sbert does not have: " + ", ".join(sorted(set(missing)))


# -- the command line ---------------------------------------------------------------------------------------
CLI = PACKAGE / "cli"
CLI_HELPER_LINES = 25  # a cli function that does not use click may be at most this long
CLI_REFUSED_IMPORTS = ("numpy", "torch", "sbert.atomic")  # arrays, tensors and file writing are the library's


def test_the_cli_only_parses_and_prints():
    """The rule of docs/architecture.md: a ``cli`` module imports neither numpy, torch nor ``sbert.atomic``
    and opens no file itself, and a function there that does not use click (no ``click`` in it or its
    decorators) is at most CLI_HELPER_LINES lines: anything longer is library logic, and goes into the library."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [f"{path.name} imports {a.name}" for a in node.names if a.name.startswith(CLI_REFUSED_IMPORTS)]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(CLI_REFUSED_IMPORTS):
                found.append(f"{path.name} imports {node.module}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                found.append(f"{path.name}:{node.lineno} opens a file")
            elif isinstance(node, ast.FunctionDef):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                size = node.end_lineno - node.lineno + 1
                if "click" not in names and size > CLI_HELPER_LINES:
                    found.append(f"{path.name}: {node.name} ({size} lines, no click)")
    assert not found, "library logic in the CLI: " + "; ".join(found)


def test_every_module_is_named_in_the_architecture_map():
    """docs/architecture.md's "Every module" table names each module under src/sbert in its package's row
    (a package's ``__init__.py`` is its row)."""
    doc = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {}
    for line in doc.split("## Every module", 1)[1].split("\n## ", 1)[0].splitlines():
        cells = line.split("|")
        if len(cells) > 2 and cells[1].strip().startswith("`"):
            rows[cells[1].strip().strip("`").rstrip("/")] = cells[2]
    package_root = PACKAGE
    missing = []
    for path in sorted(package_root.rglob("*.py")):
        if path.name == "__init__.py" and path.parent != package_root:
            continue  # a package is named by its row
        folder = path.parent.relative_to(package_root).as_posix()
        row = rows.get("sbert" if folder == "." else folder, "")
        if f"`{path.name}`" not in row:
            missing.append(path.relative_to(package_root).as_posix())
    assert not missing, f"docs/architecture.md's 'Every module' table does not name: {missing}"


def test_one_class_per_name():
    """No two classes of sbert share a name (two ``Hit`` classes meant two things)."""
    seen: dict[str, str] = {}
    twice = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                if node.name in seen:
                    twice.append(f"{node.name} ({seen[node.name]}, {name})")
                seen.setdefault(node.name, name)
    assert not twice, f"classes named twice: {twice}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_a_private_name_of_another():
    """A name starting with ``_`` is its module's own: no module under src/sbert imports one from another
    (``from sbert.x import _y``, at the top or inside a function) nor reaches one through an imported module
    (``from sbert import x; x._y``); what two modules share is public. Dunder names (``__version__``) are not
    private."""
    modules = _modules()
    found = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        as_modules: set[str] = set()  # local names bound to sbert modules
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                as_modules |= {a.asname for a in node.names if a.name.startswith("sbert.") and a.asname}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if not base.startswith("sbert"):
                    continue
                found += [f"{name}: from {base} import {a.name}" for a in node.names if _private(a.name)]
                as_modules |= {a.asname or a.name for a in node.names if f"{base}.{a.name}" in modules}
        found += [
            f"{name}:{node.lineno} {node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr)
            if node.value.id in as_modules
        ]
    assert not found, "private names imported from another module: " + "; ".join(sorted(found))
