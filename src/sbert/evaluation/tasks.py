"""Named evaluation tasks read from the data folder: ``stsb``, ``sick-r``, ``sts12``..``sts16``, SentEval,
and retrieval collections (``scifact``, ``openoffice-dups``: ``<data>/retrieval/<name>``, test split).

``TASKS`` is the one table of them: each name -> a ``Task`` (its kind and the function that makes its
evaluator from the data folder and the run's ``Options``). ``task_evaluator(name, data_dir)`` gives a
task's evaluator; ``expand(names)`` resolves the group names ``sts`` (every STS task), ``senteval`` (every
transfer task) and ``retrieval`` (every collection). Adding a task: one ``TASKS`` entry (and, for a new
kind of evaluation, its evaluator module). (The dev evaluation of a training run reads a file in a
training data format instead: ``sbert.evaluation.dev``.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sbert.errors import InputFileError

if TYPE_CHECKING:
    from sbert.evaluation.retrievers import RetrievalSettings

STS_YEARS = {f"sts{y}": f"STS{y}-en-test" for y in (12, 13, 14, 15, 16)}
TRANSFER = {
    "mr": "MR",
    "cr": "CR",
    "subj": "SUBJ",
    "mpqa": "MPQA",
    "sst2": "SST2",
    "trec": "TREC",
    "mrpc": "MRPC",
}
STS_TASKS = ("stsb", "sick-r", *STS_YEARS)
RETRIEVAL = ("scifact", "openoffice-dups")  # BEIR-layout folders under <data>/retrieval/
GROUPS = {"sts": STS_TASKS, "senteval": tuple(TRANSFER), "retrieval": RETRIEVAL}


@dataclass(frozen=True)
class Options:
    """What a run passes every task: STS years' ``tokenized`` copies, SentEval's ``inner_folds``, the
    ``batch_size``, and how retrieval tasks retrieve (``retrieval``: a ``RetrievalSettings``)."""

    tokenized: bool = False
    inner_folds: int = 5
    batch_size: int = 32
    retrieval: RetrievalSettings | None = None


@dataclass(frozen=True)
class Task:
    """A named task: its ``kind`` ("sts", "transfer", "retrieval") and ``make(name, data, options)``."""

    kind: str
    make: Callable[[str, Path, Options], Any]


def _stsb(name: str, data: Path, options: Options):
    from sbert.data.sts import read_stsb
    from sbert.evaluation.sts import STSEvaluator

    split = "test" if name == "stsb" else "dev"
    return STSEvaluator(list(read_stsb(data / "stsbenchmark" / f"sts-{split}.csv")), name, options.batch_size)


def _sick(name: str, data: Path, options: Options):
    from sbert.data.examples import ScoredPair
    from sbert.data.sts import read_sick
    from sbert.evaluation.sts import STSEvaluator

    pairs = [p for p in read_sick(data / "sick" / "SICK_test_annotated.txt") if isinstance(p, ScoredPair)]
    return STSEvaluator(pairs, name, options.batch_size)  # relatedness: each a ScoredPair


def _sts_year(name: str, data: Path, options: Options):
    from sbert.data.sts import read_semeval_sts
    from sbert.evaluation.sts import STSSubsetsEvaluator

    folder = data / "sts12-16" / ("senteval_tokenized" if options.tokenized else "raw") / STS_YEARS[name]
    if not folder.is_dir():
        raise InputFileError(
            f"{folder}: {name.upper()} folder not found (expected the SemEval release "
            "files STS.input.*.txt and STS.gs.*.txt)"
        )
    return STSSubsetsEvaluator(read_semeval_sts(folder), name, options.batch_size)


def _transfer(name: str, data: Path, options: Options):
    from sbert.data.transfer import read_transfer_task
    from sbert.evaluation.transfer import TransferEvaluator

    task = read_transfer_task(data / "senteval_transfer", TRANSFER[name])
    return TransferEvaluator(task, options.batch_size, options.inner_folds)


def _retrieval(name: str, data: Path, options: Options):
    from sbert.data.beir import read_beir
    from sbert.evaluation.retrieval import RetrievalEvaluator

    collection = read_beir(data / "retrieval" / name, "test")
    retriever = options.retrieval.retriever() if options.retrieval else None
    return RetrievalEvaluator(collection, name, retriever=retriever, batch_size=options.batch_size)


TASKS: dict[str, Task] = {
    "stsb": Task("sts", _stsb),
    "sick-r": Task("sts", _sick),
    **{year: Task("sts", _sts_year) for year in STS_YEARS},
    "stsb-dev": Task("sts", _stsb),
    **{name: Task("transfer", _transfer) for name in TRANSFER},
    **{name: Task("retrieval", _retrieval) for name in RETRIEVAL},
}


def expand(names: str | list[str]) -> list[str]:
    """``"stsb,senteval"`` -> ``["stsb", "mr", "cr", ...]``, in order, without repeats."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    out: list[str] = []
    for name in names:
        key = name.lower()
        for task in GROUPS.get(key, (key,)):
            if task not in TASKS:
                raise ValueError(
                    f"unknown task {name!r}; expected one of {', '.join(TASKS)}, or a group: {', '.join(GROUPS)}"
                )
            if task not in out:
                out.append(task)
    return out


def task_evaluator(
    name: str,
    data: Path,
    tokenized: bool = False,
    inner_folds: int = 5,
    batch_size: int = 32,
    retrieval: RetrievalSettings | None = None,
):
    """The evaluator for task ``name`` (a ``TASKS`` entry); STS years read the raw release unless ``tokenized``;
    retrieval tasks retrieve as ``retrieval`` says (default: dense, documents cut at the model's limit)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {', '.join(TASKS)}")
    return TASKS[name].make(name, Path(data), Options(tokenized, inner_folds, batch_size, retrieval))


def headline(name: str, metrics: dict[str, float]) -> tuple[str, float]:
    """The number a table shows for a task's ``metrics`` when its evaluator is not at hand (with it:
    ``evaluator.primary_metric(model)``): Spearman x 100 of cosine (of the scores, for a cross-encoder),
    accuracy x 100, or NDCG@10 x 100 for retrieval."""
    for key in (
        "spearman_cosine",
        "all_pooled/spearman_cosine",
        "spearman_score",
        "all_pooled/spearman_score",
        "accuracy",
        "ndcg@10",
    ):
        if key in metrics:
            return key, metrics[key]
    raise KeyError(f"{name}: no headline metric in {sorted(metrics)}")
