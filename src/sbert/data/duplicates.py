"""A retrieval collection from a bug tracker's own duplicate links: the few labels a team already has, made
into a BEIR folder that ``sbert eval --retrieval`` measures on and ``sbert train --format beir`` /
``sbert mine-negatives`` train from.

The export (read as ``sbert index build`` reads a corpus: JSON lines, or CSV/TSV with a header row, ``Columns``
naming the id, title and text) has a ``duplicate`` field on the reports resolved as duplicates: the id of the
report each one duplicates (several: separated by commas, semicolons or line breaks, and by spaces where no id
of the export holds one; a JSON list). Written:

- queries: the reports that duplicate another, each read as a new report is (title, then text);
- corpus: every other report: the masters, and the reports nobody duplicated (the haystack a new report is
  searched in, as a tracker's search would be);
- judgments: a query's relevant documents are the masters its links lead to, a chain (a duplicate of a
  duplicate) followed to its end. Links to reports outside the export are dropped (and counted). Reports whose
  links lead only among themselves (two naming each other, or a longer loop) all report one problem: the
  oldest of them (by the ``created`` field, else the first in the file) is taken as their master and the
  others as its duplicates (counted too);
- ``qrels/test.tsv`` holds the newest ``test_fraction`` of the queries (by the ``created`` field, else by their
  order in the file) and ``qrels/train.tsv`` the rest: train on the past, test on the future, as
  openoffice-dups is split (``sbert.data.time_split``). ``collection.json`` says how it was made.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sbert.atomic import FolderNotReplaceableError, atomic_dir
from sbert.data.beir import Document
from sbert.data.corpus import Columns, read_corpus, record_fields
from sbert.data.time_split import cutoff_key, parse_time, write_qrels
from sbert.errors import InputFileError

_SEPARATORS = re.compile(r"[,;\s]+")
_LIST_SEPARATORS = re.compile(r"[,;\n\r]+")  # where an id of the export holds a space, spaces do not separate
FILE_ORDER = "file order"


@dataclass(frozen=True)
class LinkedCollection:
    """What ``collection_from_links`` wrote (also ``collection.json``): counts, the cut-off (the first test
    query's time, or id in file order) and what was dropped. ``looped_reports``: reports whose links only led
    among themselves, in ``loops`` loops, each resolved by taking its oldest report as the master.
    ``later_masters``: judgments whose master was created after its duplicate (trackers sometimes close the
    older report), kept."""

    source: str
    duplicate_field: str
    order: str
    reports: int
    documents: int
    queries: int
    train_queries: int
    test_queries: int
    cutoff: str
    unknown_links: int
    looped_reports: int
    loops: int
    later_masters: int


def collection_from_links(
    source: str | Path,
    out: str | Path,
    *,
    duplicate: str,
    columns: Columns | None = None,
    created: str | None = None,
    test_fraction: float = 0.2,
) -> LinkedCollection:
    """Write the BEIR folder ``out`` (new or empty) from the tracker export ``source`` whose ``duplicate`` field
    links each duplicate to its master (see the module); ``created``: the field of each report's creation time
    (required on the duplicates). Returns what was written."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    out, path, columns = Path(out), Path(source), columns or Columns()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FolderNotReplaceableError(f"{out}: already exists; choose a new (or empty) folder for the collection")
    documents = _reports(path, columns)
    links, unknown = _links(path, documents, duplicate, columns)
    if not links:
        raise ValueError(
            f"{path}: no report's {duplicate!r} names another report of the export ({unknown} links name ids "
            "that are not there); expected the id of the report each duplicate duplicates"
        )
    order = {d.id: n for n, d in enumerate(documents)}
    times = record_fields(path, created, skip_empty=True, columns=columns) if created else []
    stamps = _stamps(path, created, times, set(links), [d.id for d in documents]) if created else {}
    age = {r: (stamps[r], order[r]) if created else (order[r],) for r in links}
    looped, loops = _break_loops(links, age)
    queries = {report: found for report in links if (found := _masters(report, links))}
    keys = {q: (stamps[q], q) if created else (order[q],) for q in queries}
    cut = cutoff_key(keys, None, 1 - test_fraction, created)
    ordered = sorted(queries, key=keys.__getitem__)
    train, test = [q for q in ordered if keys[q] < cut], [q for q in ordered if keys[q] >= cut]
    if not train or not test:
        raise ValueError(f"{len(queries)} duplicates: {len(train)} train and {len(test)} test; both must be non-empty")
    later = sum(stamps[m] > stamps[q] for q, found in queries.items() for m in found if m in stamps)
    info = LinkedCollection(
        source=str(path),
        duplicate_field=duplicate,
        order=created or FILE_ORDER,
        reports=len(documents),
        documents=len(documents) - len(links),
        queries=len(queries),
        train_queries=len(train),
        test_queries=len(test),
        cutoff=cut[0].isoformat(sep=" ") if created else documents[cut[0]].id,
        unknown_links=unknown,
        looped_reports=looped,
        loops=loops,
        later_masters=later,
    )
    qrels = {q: dict.fromkeys(sorted(found), 1) for q, found in queries.items()}
    raw = [value for _, value in times] if created else None
    _write(out, documents, (links, queries, qrels), (train, test), info, raw)
    return info


def _reports(path: Path, columns: Columns) -> list[Document]:
    """Every report of the export, with its id (required: links name reports by it)."""
    corpus = read_corpus(path, skip_empty=True, columns=columns, unique_ids=True)
    if corpus.ids is None:
        raise InputFileError(
            f"{path}: no report has an {columns.id!r} field; links name reports by id (pass id_column=NAME for another)"
        )
    return corpus.documents()


def _links(path: Path, documents: list[Document], field: str, columns: Columns) -> tuple[dict[str, list[str]], int]:
    """(report -> the reports of the export it names as its masters, links to ids that are not there)."""
    values = record_fields(path, field, skip_empty=True, columns=columns)
    if all(value is None for _, value in values):
        raise InputFileError(f"{path}: no report has a {field!r} field; expected the id of each duplicate's master")
    known, links, unknown = {d.id for d in documents}, {}, 0
    spaced = any(any(c.isspace() for c in id_) for id_ in known)
    for document, (_, value) in zip(documents, values, strict=True):
        for name in _names(value, spaced):
            if name in known and name != document.id:
                links.setdefault(document.id, []).append(name)
            elif name != document.id:
                unknown += 1
    return links, unknown


def _names(value: Any, spaced: bool = False) -> list[str]:
    """The ids a duplicate field names; ``spaced``: some id of the export holds whitespace, so only commas,
    semicolons and line breaks separate them (a JSON list's items are taken whole)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    split = _LIST_SEPARATORS.split if spaced else _SEPARATORS.split
    return [name.strip() for name in split(str(value).strip()) if name.strip()]


def _break_loops(links: dict[str, list[str]], age: dict[str, tuple]) -> tuple[int, int]:
    """Resolve the loops no link leads out of (two reports naming each other, or longer): the oldest report of
    each (smallest ``age``) becomes their master, its own links dropped. Returns (the reports whose links led
    nowhere but round a loop, the loops resolved)."""
    stuck = {report for report in links if not _masters(report, links)}
    loops = [loop for loop in _components(stuck, links) if all(m in loop for r in loop for m in links[r])]
    for loop in loops:
        del links[min(loop, key=age.__getitem__)]
    return len(stuck), len(loops)


def _components(nodes: set[str], links: dict[str, list[str]]) -> list[set[str]]:
    """The strongly connected components of ``links`` among ``nodes`` (Kosaraju's, without recursion)."""
    finished, seen = [], set()
    for start in sorted(nodes):
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(links[start]))]
        while stack:
            node, targets = stack[-1]
            step = next((t for t in targets if t in nodes and t not in seen), None)
            if step is None:
                stack.pop()
                finished.append(node)
            else:
                seen.add(step)
                stack.append((step, iter(links[step])))
    named_by: dict[str, list[str]] = {node: [] for node in nodes}
    for node in nodes:
        for target in links[node]:
            if target in nodes:
                named_by[target].append(node)
    components, placed = [], set()
    for start in reversed(finished):
        if start in placed:
            continue
        placed.add(start)
        component, todo = set(), [start]
        while todo:
            node = todo.pop()
            component.add(node)
            for source in named_by[node]:
                if source not in placed:
                    placed.add(source)
                    todo.append(source)
        components.append(component)
    return components


def _masters(report: str, links: dict[str, list[str]]) -> set[str]:
    """The reports ``report``'s links lead to that duplicate nothing (chains followed; a loop leads nowhere)."""
    found, seen, todo = set(), {report}, list(links[report])
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in links:
            todo.extend(links[name])
        else:
            found.add(name)
    return found


def _stamps(path: Path, field: str, times: list[tuple[int, Any]], required: set[str], ids: list[str]) -> dict[str, Any]:
    """Report id -> its creation time (``times``: each report's line and ``field`` value), for every report that
    has one; a duplicate without one (or with a time that does not parse) raises InputFileError naming the line."""
    stamps = {}
    for report, (number, value) in zip(ids, times, strict=True):
        if value is None or not str(value).strip():
            if report in required:
                raise InputFileError(f"{path}: line {number}: duplicate {report!r} has no {field!r}; expected a time")
            continue
        try:
            stamps[report] = parse_time(str(value))
        except ValueError:
            raise InputFileError(
                f"{path}: line {number}: {field!r} is {value!r}; expected a time such as 2000-10-25 10:37:00 +0000"
            ) from None
    return stamps


def _write(out: Path, documents: list[Document], found: tuple, splits: tuple, info: LinkedCollection, created) -> None:
    """corpus.jsonl, queries.jsonl (with ``created`` where given: ``split_by_time`` can cut it again),
    qrels/{train,test}.tsv and collection.json, written at once (``atomic_dir``)."""
    links, queries, qrels = found
    with atomic_dir(out) as tmp:
        with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as handle:
            for d in documents:
                if d.id not in links:
                    handle.write(json.dumps({"_id": d.id, "title": d.title, "text": d.text}, ensure_ascii=False) + "\n")
        with open(tmp / "queries.jsonl", "w", encoding="utf-8") as handle:
            for n, d in enumerate(documents):
                if d.id in queries:
                    record = {"_id": d.id, "text": d.joined()} | ({"created": str(created[n])} if created else {})
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        (tmp / "qrels").mkdir()
        for name, ids in zip(("train", "test"), splits, strict=True):
            write_qrels(tmp / "qrels" / f"{name}.tsv", qrels, ids)
        (tmp / "collection.json").write_text(json.dumps(asdict(info), indent=2) + "\n", encoding="utf-8")
