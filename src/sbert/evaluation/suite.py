"""``sbert eval`` as a library: the evaluators for named tasks and BEIR folders, run one after another
on a model, their results written as JSON and their rankings as TREC run files.

``evaluators(...)`` -> ``{name: evaluator}``; ``run_evaluators(evaluators, model)`` -> results and one
``Scored`` row per evaluator (its headline metric and time); ``save_results`` writes them atomically.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbert.evaluation.tasks import RETRIEVAL, expand, task_evaluator

DEFAULT_TASKS = "stsb,sick-r"  # what `sbert eval` scores when neither tasks nor retrieval folders are named


@dataclass(frozen=True)
class Scored:
    """One evaluator's headline: its ``metric``, that metric's ``value`` and the ``seconds`` it took."""

    name: str
    metric: str
    value: float
    seconds: float


def task_folders(tasks: str | None, retrieval_dirs: tuple[Path, ...] = (), data: Path | None = None) -> dict[str, Path]:
    """Each named task -> the data folder (none named: ``DEFAULT_TASKS``, unless retrieval folders are given)."""
    from sbert.data.paths import data_dir

    names = expand(tasks if tasks is not None else "" if retrieval_dirs else DEFAULT_TASKS)
    return dict.fromkeys(names, data_dir(data)) if names else {}


def needs_embeddings(folders: dict[str, Path], retrieval_dirs: tuple[Path, ...], triage_dirs: tuple = ()) -> bool:
    """Whether any evaluation retrieves (a cross-encoder cannot)."""
    return bool(retrieval_dirs) or bool(triage_dirs) or bool(set(RETRIEVAL) & set(folders))


def evaluators(
    folders: dict[str, Path],
    retrieval_dirs: tuple[Path, ...] = (),
    *,
    split: str = "test",
    skip_empty_documents: bool = False,
    tokenized: bool = False,
    inner_folds: int = 5,
    retrieval: Any = None,
    triage_dirs: tuple[Path, ...] = (),
) -> dict[str, Any]:
    """name -> evaluator: each task of ``folders`` (``task_folders``), then each BEIR folder of
    ``retrieval_dirs`` (named by the folder, or its path where two share a name), retrieving as
    ``retrieval`` (a ``RetrievalSettings``) says, then each of ``triage_dirs`` as a ``TriageEvaluator``
    (named ``<name>:triage``)."""
    from sbert.data.beir import read_beir
    from sbert.evaluation.retrieval import RetrievalEvaluator
    from sbert.evaluation.retrievers import RetrievalSettings
    from sbert.evaluation.triage import TriageEvaluator

    how = retrieval if retrieval is not None else RetrievalSettings()
    out = {name: task_evaluator(name, f, tokenized, inner_folds, how.batch_size, how) for name, f in folders.items()}
    names = [f.name for f in retrieval_dirs]
    for folder, name in zip(retrieval_dirs, names, strict=True):
        name = str(folder) if names.count(name) > 1 else name
        collection = read_beir(folder, split, skip_empty_documents)
        out[name] = RetrievalEvaluator(collection, name, retriever=how.retriever(), batch_size=how.batch_size)
    names = [f.name for f in triage_dirs]
    for folder, name in zip(triage_dirs, names, strict=True):
        name = f"{str(folder) if names.count(name) > 1 else name}:triage"
        out[name] = TriageEvaluator(read_beir(folder, split, skip_empty_documents), name, how.batch_size)
    return out


def has_rankings(found: dict[str, Any]) -> bool:
    """Whether any evaluator keeps rankings (a retrieval evaluation) for ``write_rankings``."""
    return any(hasattr(e, "run") for e in found.values())


def run_evaluators(
    found: dict[str, Any],
    model: Any,
    show_progress: bool | None = None,
    starting: Callable[[str], None] | None = None,
) -> tuple[dict[str, dict], list[Scored]]:
    """Every evaluator of ``found`` on ``model``, in order: name -> metrics, and each one's ``Scored`` row;
    ``starting(name)`` is called before each (the CLI prints it)."""
    results, rows = {}, []
    for name, evaluator in found.items():
        began = time.perf_counter()
        if starting is not None:
            starting(name)
        results[name] = evaluator(model, show_progress=show_progress)
        metric = evaluator.primary_metric(model)
        rows.append(Scored(name, metric, results[name][metric], time.perf_counter() - began))
    return results, rows


def save_results(path: Path, model: str, results: dict[str, dict]) -> None:
    """Every metric as JSON (``{"model": ..., "tasks": {name: metrics}}``), written atomically."""
    from sbert.atomic import atomic_file

    with atomic_file(path, "w", encoding="utf-8") as handle:
        json.dump({"model": model, "tasks": results}, handle, indent=2)


def write_rankings(path: Path, found: dict[str, Any]) -> list[Path]:
    """The rankings of the retrieval evaluations as TREC run files; returns the files written."""
    from sbert.evaluation.retrieval import write_runs

    return list(write_runs(path, {name: e.run for name, e in found.items() if hasattr(e, "run")}))
