"""Markdown tables, written atomically: a whole file under benchmarks/results, or the block between two
markers of a hand-framed file, with a guard against a partial re-run dropping committed rows."""

from __future__ import annotations

from pathlib import Path

from benchmarks.lib.paths import RESULTS


def markdown_table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def write_result(name: str, lines: list[str]) -> Path:
    """Print ``lines`` and write them to ``benchmarks/results/<name>`` atomically."""
    from sbert.atomic import atomic_file

    text = "\n".join(lines) + "\n"
    print(text)
    target = RESULTS / name
    with atomic_file(target, "w", encoding="utf-8") as handle:
        handle.write(text)
    print(f"wrote {target}")
    return target


def write_between_markers(doc: Path, begin: str, end: str, lines: list[str]) -> None:
    """Replace what stands between the markers ``begin`` and ``end`` in ``doc`` by ``lines`` (atomically)."""
    from sbert.atomic import atomic_file

    text = doc.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{doc}: the markers {begin} and {end} are missing")
    head, rest = text.split(begin, 1)
    with atomic_file(doc, "w", encoding="utf-8") as handle:
        handle.write(head + begin + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1])


def row_names(lines: list[str]) -> set[str]:
    """The first cells of a markdown text's table rows (headers and separators left out), by section:
    ``"## section|first cell"``, so that two tables may hold a row of the same name."""
    names, section, previous = set(), "", ""
    for line in lines:
        if line.startswith("#"):
            section = line.strip("# ").strip()
        elif line.startswith("|") and not set(line) <= set("|-: ") and not previous.startswith("|"):
            pass  # a header row: the line after it is the separator
        elif line.startswith("|") and not set(line) <= set("|-: "):
            names.add(f"{section}|{line.split('|')[1].strip()}")
        previous = line
    return names


def rows_lost(doc: Path, begin: str, end: str, lines: list[str]) -> list[str]:
    """The table rows that stand between ``begin`` and ``end`` in ``doc`` and that ``lines`` would drop."""
    text = doc.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        return []
    old = text.split(begin, 1)[1].split(end, 1)[0].splitlines()
    return sorted(row_names(old) - row_names(lines))
