"""Label-free adaptation (``sbert adapt``) and label-free search choice (``--auto``), on collections whose
queries and judgments neither ever reads.

For each BEIR collection (SciFact; openoffice-dups split in time: the test part is the newest 20% of
reports), every figure is scored on the same test queries by ``sbert.evaluation.RetrievalEvaluator``
(NDCG@10, MRR@10, Recall@100) through the index code that ``sbert index build`` + ``sbert search`` run:
BM25 alone; then, for the default model and for the default model adapted by each ``--methods`` entry on
the collection's documents only (``sbert adapt default --corpus <collection folder> --method M``, run as a
command so that its wall time and peak memory are its own), every way of searching that ``--auto`` chooses
from (``sbert.search.auto.CHOICES``: dense, BM25, weighted and RRF fusion, whole or chunked). Each model's
rows: dense (no option), ``--auto`` (chosen on pseudo-queries held out from the documents, then scored
on the test queries) and the best choice *with* the test labels (the ceiling ``--auto`` is measured against).
Adapted models are cached under ``benchmarks/.work/adapt`` by (collection, method, steps, teacher); the
rows measured are kept, committed, in ``benchmarks/results/records/adapt/<collection>.json``: a run adds its
rows to them (a row measured again replaces its earlier self) and the tables are assembled from all of
them, so a run of one method on a fresh machine keeps every other row (``--assemble``: run nothing).
Beside them, for openoffice-dups, the rows that use its training labels (the older 80% of queries), kept by
``benchmarks/batches.py``: fine-tuned from the default model, and from the adapted model (supervised after
adapt; ``python -m benchmarks.batches --variants adapted``).

Choosing without fooling ourselves: for each collection, the method the OTHER collection's test queries
would have chosen, and its score here: that is the figure a user with a new collection can expect.
Where the two choose apart, the default is the method whose gain averaged over the collections is highest
(the lines under the table).

    python -m benchmarks.adapt [--collections scifact,openoffice-dups] [--methods title,crop,title+crop]
                               [--steps 100] [--teacher all-mpnet-base-v2] [--queries N --documents N]
                               [--temperature 1] [--device cuda]
    python -m benchmarks.adapt --assemble   # run nothing: the tables again from the rows kept
    (a method as METHOD@SEED: another seed than 42; METHOD/N: adapted with ``--hold-out N``, the documents
    ``--auto`` draws its N pseudo-queries from left out of training; METHOD/default: with sbert adapt's
    default hold-out; a method without /: ``--hold-out 0``, every document trained on, as the rows were first
    measured. benchmarks/adapt_holdout.py sets the two side by side for --auto)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from copy import copy
from dataclasses import dataclass, field
from pathlib import Path

import torch

import sbert
from benchmarks.lib import (
    RECORDS,
    RESULTS,
    WORK,
    cpu_name,
    device_name,
    environment_lines,
    load_record,
    markdown_table,
    rows_lost,
    write_between_markers,
    write_record,
    write_result,
)
from benchmarks.lib.children import ends_with_parent
from benchmarks.lib.retrieval_data import sample, test_part
from sbert.adapt.methods import DEFAULT_METHOD, METHODS
from sbert.adapt.recipe import AdaptSettings
from sbert.data.beir import RetrievalCollection
from sbert.data.paths import data_dir
from sbert.errors import ModelNotFoundError
from sbert.evaluation.retrieval import RetrievalEvaluator
from sbert.evaluation.retrievers import IndexRetriever, LexicalRetriever, RetrievalSettings
from sbert.model_names import resolve
from sbert.search.auto import CHOICES, SearchChoice, choose_search

AUTO_KIND = "title"  # the --auto rows' pseudo-queries, as first measured (benchmarks/auto_kinds.py: the others)
KEEP_DEFAULT = False  # and the best on them, as first measured (before --auto kept the default within a standard error)

DOC = RESULTS / "retrieval-evidence.md"
BEGIN, END = "<!-- benchmarks/adapt.py: begin -->", "<!-- benchmarks/adapt.py: end -->"
METRICS = ("ndcg@10", "mrr@10", "recall@100")
# distill-kl's rows without a temperature in their name were measured at 0.05 (sbert adapt's default before
# 2026-11-27; 1 since): a run at another temperature is a row (and a method) of its own, and every run passes
# its temperature to sbert adapt, whatever that command's default
KL_TEMPERATURE = 0.05
TEACHER = "all-mpnet-base-v2"  # --teacher: the larger model the teacher methods are measured with
HEADLINE = {"scifact": "ndcg@10", "openoffice-dups": "mrr@10"}
COLLECTIONS = ("scifact", "openoffice-dups")
# exit codes of an interrupted child (Ctrl-C, SIGTERM; negative: killed by the signal), whose run resumes
INTERRUPTED = (130, 143, -2, -9, -15)
LABELS = "labels"  # a --methods entry ("labels", "METHOD>labels"): fine-tuned with the training judgments


@dataclass
class Row:
    name: str
    metrics: dict[str, float]
    method: str = ""  # the adapt method ("" for the default model and BM25)
    search: str = ""  # dense, auto, best with labels
    choice: str = ""  # the CHOICES entry it ran
    adapt: dict = field(default_factory=dict)  # seconds, peak_rss_gib, steps of the adapt run
    choices: dict = field(default_factory=dict)  # on "dense" rows: every CHOICES entry's metrics
    evidence: dict = field(default_factory=dict)  # on --auto rows: each choice's NDCG@10 on the pseudo-queries
    labels: bool = False  # trained on the collection's training judgments (never a label-free choice)


class Built:
    """A retriever over an index already built (``IndexRetriever``), searched with other settings: every
    way of searching is scored on one embedding of the corpus and of the queries (``vectors``: query text
    -> its ``encode_query`` vector, filled on first use), through ``search_vectors`` as ``search_texts``
    calls it."""

    def __init__(self, base: IndexRetriever, settings: RetrievalSettings, vectors: dict) -> None:
        self.inner = copy(base)
        self.inner.settings = settings
        self.vectors = vectors

    def index(self, model, documents, show_progress=None) -> None:
        pass

    def search(self, model, queries, k):
        import numpy as np

        from sbert.search.retrieve import search_vectors

        missing = [q for q in dict.fromkeys(queries) if q not in self.vectors]
        if missing:
            found = model.encode_query(missing, batch_size=32, on_truncation="ignore")
            self.vectors.update(zip(missing, found, strict=True))
        options = self.inner.settings.search_options(k, None)
        vectors = np.stack([self.vectors[q] for q in queries])
        return search_vectors(self.inner.built, vectors, list(queries), options)


def settings_of(choice: SearchChoice) -> RetrievalSettings:
    """``RetrievalSettings`` searching as ``choice`` does (what ``--auto`` would apply)."""
    hybrid = {"fusion": choice.fusion, "alpha": choice.alpha} if choice.hybrid else {}
    return RetrievalSettings(chunk=choice.chunk, hybrid=choice.hybrid, **hybrid)


def every_choice(model, collection: RetrievalCollection) -> dict[str, dict[str, float]]:
    """Each ``CHOICES`` entry's metrics on the test queries: one index (with BM25) per chunking."""
    documents = list(collection.corpus.values())
    scores, vectors = {}, {}
    for chunk in dict.fromkeys(c.chunk for c in CHOICES):
        base = IndexRetriever(RetrievalSettings(chunk=chunk, hybrid=True))
        base.index(model, documents, show_progress=False)
        for choice in (c for c in CHOICES if c.chunk == chunk):
            evaluator = RetrievalEvaluator(
                collection, choice.name, Built(base, settings_of(choice), vectors), latency_queries=0
            )
            metrics = evaluator(model)
            scores[choice.name] = {m: metrics[m] for m in METRICS}
            print(f"    {choice.name}: " + ", ".join(f"{m} {metrics[m]:.2f}" for m in METRICS), flush=True)
    return scores


def model_rows(label: str, method: str, model, collection: RetrievalCollection, name: str, cost: dict) -> list[Row]:
    """Dense, ``--auto`` and the best choice with the labels, for one model on one collection."""
    print(f"  {label}: every way of searching, on the test queries", flush=True)
    scores = every_choice(model, collection)
    began = time.perf_counter()
    auto = choose_search(
        model,
        list(collection.corpus.values()),
        model=label,
        kind=AUTO_KIND,
        keep_default=KEEP_DEFAULT,
        show_progress=False,
    )
    print(f"    {auto.summary()} [{time.perf_counter() - began:.0f} s]", flush=True)
    metric = HEADLINE[name]
    best = max(CHOICES, key=lambda c: scores[c.name][metric]).name
    return [
        Row(f"{label}, dense", scores["dense"], method, "dense", "dense", cost, scores),
        Row(f"{label}, --auto", scores[auto.choice.name], method, "auto", auto.choice.name, cost, {}, auto.scores),
        Row(f"{label}, best with test labels", scores[best], method, "best", best, cost),
    ]


def adapt_key(method: str, args) -> str:
    """The name an adapted model is kept under: method, steps and (teacher methods) the teacher."""
    teacher = args.teacher if method.startswith("distill") else None
    seed = f"-seed{args.seed}" if args.seed != 42 else ""  # 42: sbert adapt's default, the first runs' key
    hold_out = getattr(args, "hold_out", 0)  # None: sbert adapt's default hold-out (since it has one)
    held = "-holdout-default" if hold_out is None else f"-holdout{hold_out}" if hold_out else ""
    warm = f"-T{args.temperature:g}" if other_temperature(method, args) else ""
    guide = f"-guide-{Path(args.guide).name}{margin_words(args, '-m')}" if guided(method, args) else ""
    return f"{method}-{args.steps}" + (f"-{Path(teacher).name}" if teacher else "") + warm + guide + seed + held


def guided(method: str, args) -> bool:
    """Whether ``method`` trains with ``--guide`` in this run (in-batch methods only: the others have no
    in-batch negatives to mask, and sbert adapt refuses a guide for them)."""
    return bool(getattr(args, "guide", None)) and method in METHODS and METHODS[method].in_batch


def margin_words(args, before: str) -> str:
    """The guide's margin as a name says it: nothing at GISTEmbed's 0."""
    return f"{before}{args.guide_margin:g}" if args.guide_margin else ""


def other_temperature(method: str, args) -> bool:
    """Whether ``method`` trains with KL at another temperature than the unnamed rows' (a row of its own)."""
    return "distill-kl" in method and getattr(args, "temperature", KL_TEMPERATURE) != KL_TEMPERATURE


def run_options(args) -> str:
    """The options that say what a run measured: methods, steps, and a teacher or temperature not the default."""
    options = f"--methods {args.methods} --steps {args.steps}"
    options += f" --teacher {args.teacher}" if args.teacher != TEACHER and "distill" in args.methods else ""
    if "distill-kl" in args.methods and args.temperature != KL_TEMPERATURE:
        options += f" --temperature {args.temperature:g}"
    if getattr(args, "guide", None):
        options += f" --guide {args.guide}" + margin_words(args, " --guide-margin ")
    return options


def adapted(collection: str, method: str, args) -> tuple[Path, dict]:
    """The default model adapted to ``collection``'s documents by ``method`` (cached), and its run's cost."""
    teacher = args.teacher if method.startswith("distill") else None  # adapt_key names it too
    key = adapt_key(method, args)
    out = WORK / "adapt" / collection / key
    record = out.with_name(key + ".json")
    if record.is_file() and out.is_dir():
        return out, json.loads(record.read_text())
    corpus = data_dir(args.data) / "retrieval" / collection
    command = ["adapt", "default", "--corpus", str(corpus), "--out", str(out)]
    command += ["--method", method, "--steps", str(args.steps), "--seed", str(args.seed)]
    hold_out = getattr(args, "hold_out", 0)  # 0: every document trained on, as the rows without /N were
    command += [] if hold_out is None else ["--hold-out", str(hold_out)]
    command += ["--device", args.device, "--no-progress"]
    command += ["--teacher", teacher] if teacher else []
    command += ["--temperature", f"{args.temperature:g}"] if "distill-kl" in method else []
    command += ["--guide", args.guide, "--guide-margin", f"{args.guide_margin:g}"] if guided(method, args) else []
    kept = [out.with_name(out.name + ".train") / name for name in ("checkpoint.pt", "teacher-scores.jsonl")]
    command += ["--resume"] if any(path.is_file() for path in kept) else []  # a killed run: its steps and scores
    cost = timed_run(command, record, args)
    if guided(method, args):  # what the guide dropped, beside the run's cost
        cost |= guide_counts(out)
        record.write_text(json.dumps(cost))
    return out, cost


def guide_counts(out: Path) -> dict:
    """What the guide dropped in the adapt run that wrote ``out`` (its log's summary; a resumed run: the last
    part's steps only)."""
    log = out.with_name(out.name + ".train") / "log.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    summaries = [json.loads(line)["summary"] for line in lines if '"summary"' in line]
    dropped = summaries[-1].get("guide_dropped", {}) if summaries else {}
    return {"guide_dropped": next(iter(dropped.values()))} if dropped else {}


def record_path(name: str) -> Path:
    """Where ``name``'s rows are kept, committed (``benchmarks/results/records/adapt/<name>.json``)."""
    return RECORDS / "adapt" / f"{name}.json"


def read_record(name: str) -> tuple[list[Row], list[str]]:
    """The rows and the runs kept for ``name`` (none yet: empty)."""
    kept = _record(name)
    return [Row(**row) for row in kept.get("rows", [])], kept.get("runs", [])


def _record(name: str) -> dict:
    return load_record(record_path(name))


def keep_rows(name: str, rows: list[Row], run: str) -> tuple[list[Row], list[str]]:
    """``name``'s kept rows with this run's merged in: a row measured again replaces its earlier self in
    place, a new one is added after the others, and no earlier row is dropped (a row that lost stays)."""
    from dataclasses import asdict

    kept = _record(name)  # its rows, its runs and any note, kept as they are
    fresh = {row.name: row for row in rows}
    merged = [fresh.pop(row["name"], None) or Row(**row) for row in kept.get("rows", [])] + list(fresh.values())
    runs = [*kept.get("runs", []), run]
    write_record(record_path(name), {**kept, "runs": runs, "rows": [asdict(row) for row in merged]})
    return merged, runs


def _collection_rows(name: str, args) -> list[Row]:
    collection = sample(test_part(name, args), args.queries, args.documents)
    print(f"{name}: {len(collection.queries)} test queries, {len(collection.corpus)} documents", flush=True)
    bm25 = RetrievalEvaluator(collection, "bm25", LexicalRetriever(), latency_queries=0)(None)
    rows = [Row("BM25 alone (bm25s)", {m: bm25[m] for m in METRICS})]
    quick = args.queries is not None or args.documents is not None
    make_default = lambda: ("default", {}), "default"
    rows += scored_model(name, "default model", "", make_default, collection, quick, args.device)
    for spec in args.methods.split(","):  # METHOD[@SEED][/N]: another seed than sbert adapt's 42; --hold-out N
        if spec.endswith(LABELS):  # "labels" or "METHOD>labels": fine-tuned with the training judgments
            rows += labelled_rows(name, spec.partition(">")[0] if ">" in spec else "", collection, quick, args)
            continue
        spec, _, held = spec.partition("/")
        method, _, seed = spec.partition("@")
        one = copy(args)
        one.seed, one.hold_out = int(seed or 42), None if held == "default" else int(held or 0)
        seeded = f" (seed {one.seed})" if one.seed != 42 else ""  # another seed: a row (and a method) of its own
        seeded += f" (hold-out {one.hold_out})" if one.hold_out else " (default hold-out)" if held == "default" else ""
        seeded += f" (temperature {args.temperature:g})" if other_temperature(method, args) else ""
        seeded += f" (guide {Path(args.guide).name}{margin_words(args, ', margin ')})" if guided(method, one) else ""
        make = (lambda m=method, a=one: adapted(name, m, a)), adapt_key(method, one)
        label = f"adapt --method {method}{seeded}"
        rows += scored_model(name, label, method + seeded, make, collection, quick, args.device)
        if one.hold_out and not quick:
            rows.append(auto_from_trained_documents(name, label, method + seeded, make, rows[-3], args))
    return rows


def labelled_rows(name: str, base: str, collection: RetrievalCollection, quick: bool, args) -> list[Row]:
    """The rows of the default model (``base`` empty) or of the model adapted by ``base``, fine-tuned with
    ``name``'s training judgments (``fine_tuned``): not label-free, so never among the methods chosen."""
    label = f"adapt --method {base}, then fine-tuned with labels" if base else "fine-tuned with labels"
    one = copy(args)
    one.seed, one.hold_out = 42, 0
    key = f"labels-{adapt_key(base, one) if base else 'default'}" + ("-quick" if quick else "")
    make = (lambda: fine_tuned(name, base, key, quick, one)), key
    rows = scored_model(name, label, f"{base}>{LABELS}" if base else LABELS, make, collection, quick, args.device)
    for row in rows:
        row.labels = True
    return rows


def fine_tuned(name: str, base: str, key: str, quick: bool, args, options: tuple[str, ...] = ()) -> tuple[Path, dict]:
    """The default model, or the model adapted by ``base``, fine-tuned on ``name``'s training judgments with
    benchmarks/finetune_retrieval.py's recipe, run as the commands its docstring documents (``sbert
    mine-negatives`` with the default model, once per collection; then ``sbert train`` with ``options``
    after its own); cached. Its cost: the training's (``mining_seconds`` beside it)."""
    from benchmarks.finetune_retrieval import RECIPE, training
    from benchmarks.lib.retrieval_data import split_collection

    out = WORK / "adapt" / name / key
    record = out.with_name(key + ".json")
    if record.is_file() and out.is_dir():
        return out, json.loads(record.read_text())
    model = str(adapted(name, base, args)[0]) if base else "default"
    folder, mined = split_collection(name, args.data), out.parent / "negatives-default.jsonl"
    began = time.perf_counter()
    if not mined.is_file():  # mine-negatives writes its --out atomically: a killed run leaves none
        recipe = [f"--{option.replace('_', '-')}={value}" for option, value in RECIPE.items()]
        command = ["mine-negatives", str(folder), "--split", "train", *recipe, "--keep-incomplete"]
        run_sbert([*command, "--out", str(mined), "--device", args.device])
    mining, load = time.perf_counter() - began, os.getloadavg()[0]
    settings = training(name)
    command = ["train", "--model", model, "--objective", "mnrl", "--format", "ntuples", "--train", str(mined)]
    command += ["--batch-size", str(settings["batch_size"]), "--epochs", str(settings["epochs"]), "--out", str(out)]
    command += ["--seed", str(args.seed), "--device", args.device, "--no-progress", *options]
    command += ["--max-steps", "2"] if quick else []
    command += ["--resume"] if (out.with_name(out.name + ".train") / "checkpoint.pt").is_file() else []
    cost = timed_run(command, record, args, load=load, extra={"mining_seconds": round(mining, 1)})
    return out, cost


def machine(args) -> str:
    """What this run ran on, as a record's run line says it: the CPU and its cores, or the GPU."""
    where = device_name(args.device)
    return f"{cpu_name()}, {os.cpu_count()} cores" if where == "cpu" else where


def run_sbert(command: list[str], env: dict[str, str] | None = None) -> float:
    """``sbert COMMAND`` as a child process (``env``: set in its environment too); its own peak memory in GiB
    (``wait4``'s usage of that child alone, not the largest of every child this benchmark has run). A non-zero
    exit raises ``CalledProcessError``."""
    shown = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    print(f"  running: {shown + ' ' if shown else ''}sbert {' '.join(command)}", flush=True)
    environment = {**os.environ, **(env or {})}
    child = subprocess.Popen(
        [sys.executable, "-m", "sbert", *command], env=environment, preexec_fn=ends_with_parent(signal.SIGINT)
    )
    try:
        _, status, usage = os.wait4(child.pid, 0)
    except BaseException:  # Ctrl-C: the child has the same signal; wait for it to save its checkpoint
        child.wait()
        raise
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, child.args)
    return usage.ru_maxrss / 2**20  # KiB on Linux


def timed_run(command: list[str], record: Path, args, load: float | None = None, extra: dict | None = None) -> dict:
    """Run ``sbert COMMAND`` and write its cost into ``record``: wall time, the child's peak memory, the load
    around it. A run that is interrupted (killed, Ctrl-C) leaves what it had cost in ``<record>.partial``, and
    the run that resumes it adds that in: a resumed row's wall time is its parts' sum (``parts`` counts them),
    its peak the largest part's, its load before the first part's."""
    partial = record.with_name(record.name + ".partial")
    done = load_record(partial, {"seconds": 0.0, "peak_rss_gib": 0.0, "parts": 0})
    load = os.getloadavg()[0] if load is None else load
    began, peak = time.perf_counter(), 0.0
    try:
        peak = run_sbert(command)
    except BaseException as err:
        crashed = isinstance(err, subprocess.CalledProcessError) and err.returncode not in INTERRUPTED
        if not crashed:  # an interruption is a part a resumed run adds to; a crash is not
            so_far = {"load_before": round(load, 2), **done}
            so_far["seconds"] = round(done["seconds"] + time.perf_counter() - began, 1)
            so_far["parts"] = done["parts"] + 1
            partial.write_text(json.dumps(so_far))
        raise
    cost = {
        "seconds": round(done["seconds"] + time.perf_counter() - began, 1),
        "peak_rss_gib": round(max(done["peak_rss_gib"], peak), 2),
        "load_before": done.get("load_before", round(load, 2)),
        "load_after": round(os.getloadavg()[0], 2),
        "steps": args.steps,
        "device": device_name(args.device),
        **(extra or {}),
    }
    if done["parts"]:
        cost["parts"] = done["parts"] + 1
    record.write_text(json.dumps(cost))
    partial.unlink(missing_ok=True)
    return cost


def auto_from_trained_documents(name: str, label: str, method: str, make: tuple, dense: Row, args) -> Row:
    """The control of a model adapted with ``--hold-out``: ``--auto`` drawing its pseudo-queries with another
    seed (1) from the whole corpus, not the documents the model's adapt.json held out, i.e. from documents the
    model trained on (all but a few), scored on the test queries (from the dense row's every-choice metrics);
    kept in .work/adapt/<name>/<label>-<folder>.trained-auto.json."""
    from dataclasses import asdict

    cache = WORK / "adapt" / name / f"{label.replace(' ', '_')}-{make[1]}.trained-auto.json"
    if cache.is_file():
        return Row(**json.loads(cache.read_text()))
    folder, cost = make[0]()
    corpus = list(test_part(name, args).corpus.values())
    model = sbert.load(str(folder), device=args.device)
    auto = choose_search(  # adapted=False: not the held-out documents its adapt.json names, the others
        model, corpus, model=label, seed=1, kind=AUTO_KIND, keep_default=KEEP_DEFAULT, show_progress=False,
        adapted=False,
    )  # fmt: skip
    print(f"    from trained documents (seed 1): {auto.summary()}", flush=True)
    choice = auto.choice.name
    row = Row(f"{label}, --auto from trained documents", dense.choices[choice], method, "auto", choice, cost)
    row.evidence = auto.scores
    cache.write_text(json.dumps(asdict(row)))
    return row


def scored_model(
    name: str, label: str, method: str, make: tuple, collection: RetrievalCollection, quick: bool, device: str
) -> list[Row]:
    """``model_rows`` of the model ``make[0]()`` gives (its folder and adapt cost; ``make[1]``: the folder's
    name), kept per model in .work/adapt/<name>/<label>-<folder>.rows.json (full runs only), so that a
    killed run loses one model's work and rows measured elsewhere (on a GPU machine) need not the model."""
    from dataclasses import asdict

    full = not quick
    cache = WORK / "adapt" / name / f"{label.replace(' ', '_')}-{make[1]}.rows.json"
    if full and cache.is_file():
        return [Row(**row) for row in json.loads(cache.read_text())]
    folder, cost = make[0]()
    rows = model_rows(label, method, sbert.load(str(folder), device=device), collection, name, cost)
    if full:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps([asdict(row) for row in rows]))
    return rows


def supervised_rows(name: str) -> list[Row]:
    """openoffice-dups fine-tuned with its training labels by benchmarks/batches.py (CPU, seed 42, the
    sampler's batches): from the default model, and from the default model adapted first (supervised after
    adapt); dense and as a default index searches (BM25 fused, weighted 0.7). None for other collections."""
    found = []
    variants = (("sampler", "fine-tuned with labels"), ("adapted", f"adapt --method {DEFAULT_METHOD}, then fine-tuned"))
    for variant, label in variants if name == "openoffice-dups" else ():
        path = RECORDS / "batches" / f"{variant}.json"
        if path.is_file():
            kept = json.loads(path.read_text())
            for search, choice in (("dense", "dense"), ("default", "hybrid weighted 0.7")):
                words = "dense" if search == "dense" else "default search"
                metrics = {m: kept[search][m] for m in METRICS}
                found.append(Row(f"{label} (batches.py {variant}), {words}", metrics, search="labels", choice=choice))
    return found


SEEDED = re.compile(r" \(seed (\d+)\)")  # a row's method at another seed than 42 (``Run``'s label)


def unseeded(method: str) -> str:
    """A row's method without its seed: the rows of one method at several seeds are one choice."""
    return SEEDED.sub("", method)


def default_row(rows: list[Row], search: str) -> Row | None:
    """The default model's row searched ``search`` (dense, auto, ...), if the collection has one."""
    return next((r for r in rows if not r.method and r.search == search), None)


GUIDED = re.compile(r" \(guide [^)]*\)")  # a row's method trained with --guide: an option, not a method


def seed_means(rows: list[Row], search: str) -> dict[str, tuple[dict[str, float], int]]:
    """Label-free methods searched ``search``: each method's metrics averaged over its seeds, and how many.
    Guided rows are not among them: a guide is an option of a method that needs a second model (the default
    ``adapt`` has none), measured against its own unguided seeds (``guide_lines``)."""
    by_method: dict[str, list[Row]] = {}
    for row in rows:
        if row.method and not row.labels and row.search == search and not GUIDED.search(row.method):
            by_method.setdefault(unseeded(row.method), []).append(row)
    return {
        method: ({m: sum(r.metrics[m] for r in seeded) / len(seeded) for m in METRICS}, len(seeded))
        for method, seeded in by_method.items()
    }


def transfer_lines(results: dict[str, list[Row]]) -> list[str]:
    """For each collection: the method (dense, and with ``--auto``) that the other collection's test queries
    choose among the methods run on both (a method run at several seeds by its mean), and its gain here (its
    mean) over the default model searched the same way."""
    lines = []
    for here, rows in results.items():
        for there, other in results.items():
            if there == here:
                continue
            for search in ("dense", "auto"):
                mine, theirs = seed_means(rows, search), seed_means(other, search)
                both = [method for method in theirs if method in mine]
                if not both:
                    continue
                chosen = max(both, key=lambda method: theirs[method][0][HEADLINE[there]])
                base = default_row(rows, search)
                metric = HEADLINE[here]
                score, seeds = mine[chosen][0][metric], mine[chosen][1]
                mean = f", mean of {seeds} seeds" if seeds > 1 else ""
                lines.append(
                    f"- {search}: chosen on {there} ({HEADLINE[there]}): `{chosen}`; on {here} it scores {metric} "
                    f"{score:.2f} ({score - base.metrics[metric]:+.2f} over the default model searched the same "
                    f"way{mean})"
                )
    return lines


def average_lines(results: dict[str, list[Row]], top: int = 3) -> list[str]:
    """The rule the default method follows where the collections choose apart: for dense and ``--auto``, the
    methods run on every collection ranked by their gain over the default model searched the same way (each
    collection's headline metric, a method's mean over its seeds), averaged over the collections; the first
    ``top``."""
    lines = []
    for search in ("dense", "auto"):
        bases = {name: default_row(rows, search) for name, rows in results.items()}
        means = {name: seed_means(rows, search) for name, rows in results.items()}
        everywhere = [m for m in next(iter(means.values()), {}) if all(m in mine for mine in means.values())]
        if len(results) < 2 or None in bases.values() or not everywhere:
            continue
        gains = {
            m: {name: means[name][m][0][HEADLINE[name]] - bases[name].metrics[HEADLINE[name]] for name in results}
            for m in everywhere
        }
        average = {m: sum(gains[m].values()) / len(results) for m in everywhere}
        parts = []
        for m in sorted(everywhere, key=lambda m: -average[m])[:top]:
            each = ", ".join(
                f"{name} {gains[m][name]:+.2f} ({means[name][m][1]} seed{'s' if means[name][m][1] > 1 else ''})"
                for name in results
            )
            parts.append(f"`{m}` {average[m]:+.2f} ({each})")
        lines.append(f"- {search}, best on average over the collections: " + "; ".join(parts))
    return lines


def guide_lines(results: dict[str, list[Row]]) -> list[str]:
    """For each collection, way of searching (dense, ``--auto``) and guided method: each guided row beside the
    unguided row of the same method and seed (what each ran on), and the mean difference over the seeds that
    have both (a guided seed without its unguided row is left out)."""
    lines = []
    for name, rows in results.items():
        metric = HEADLINE[name]
        for search in ("dense", "auto"):
            plain = {r.method: r for r in rows if r.search == search and not r.labels and not GUIDED.search(r.method)}
            by_method: dict[str, list[tuple[Row, Row]]] = {}
            for row in (r for r in rows if r.search == search and GUIDED.search(r.method)):
                base = GUIDED.sub("", row.method)
                if base in plain:
                    by_method.setdefault(unseeded(base), []).append((row, plain[base]))
            for method, pairs in by_method.items():
                each = "; ".join(
                    f"{_seed_of(g.method)}: {g.metrics[metric]:.2f} against {u.metrics[metric]:.2f}"
                    f" ({_ran_on(g)} / {_ran_on(u)}{_dropped(g)})"
                    for g, u in pairs
                )
                gap = sum(g.metrics[metric] - u.metrics[metric] for g, u in pairs) / len(pairs)
                guide = GUIDED.search(pairs[0][0].method).group(0).strip(" ()")
                lines.append(
                    f"- {name}, {'dense' if search == 'dense' else '--auto'}, {metric}, `{method}` with the {guide} "
                    f"against without it, seed by seed: {each}; mean {gap:+.2f} over {len(pairs)} seed(s)"
                )
    return lines


def _seed_of(method: str) -> str:
    found = SEEDED.search(method)
    return f"seed {found.group(1) if found else 42}"


def _ran_on(row: Row) -> str:
    device = row.adapt.get("device", "cpu")
    return "a GPU" if device != "cpu" else "CPU"


def _dropped(row: Row) -> str:
    counts = row.adapt.get("guide_dropped")
    return (
        f"; the guide dropped {100 * counts['dropped'] / counts['candidates']:.2f}% of in-batch candidates"
        if counts
        else ""
    )


def _dense_choices(rows: list[Row]) -> dict:
    """Every way of searching with the default model and its metrics (kept on its dense row), or none."""
    row = default_row(rows, "dense")
    return row.choices if row else {}


def search_transfer_lines(results: dict[str, list[Row]]) -> list[str]:
    """For each collection: the way of searching (default model) the other collection's test queries
    choose, and what it scores here against dense and against this collection's own best."""
    lines = []
    for here, rows in results.items():
        mine = _dense_choices(rows)
        for there, other in results.items():
            theirs = _dense_choices(other)
            if there == here or not mine or not theirs:
                continue
            chosen = max(theirs, key=lambda c: theirs[c][HEADLINE[there]])
            metric = HEADLINE[here]
            best = max(mine, key=lambda c: mine[c][metric])
            lines.append(
                f"- chosen on {there}: `{chosen}`; on {here} {metric} {mine[chosen][metric]:.2f} (dense "
                f"{mine['dense'][metric]:.2f}; the best here, `{best}`, {mine[best][metric]:.2f})"
            )
    return lines


def choices_table(results: dict[str, list[Row]]) -> list[str]:
    """Every way of searching with the default model, each collection's headline metric."""
    found = {n: _dense_choices(rows) for n, rows in results.items()}
    names = [c.name for c in CHOICES]
    header = ["default model, search", *(f"{n} {HEADLINE[n]}" for n in found)]
    body = [[c, *(f"{found[n][c][HEADLINE[n]]:.2f}" if c in found[n] else "-" for n in found)] for c in names]
    return markdown_table(header, body)


def table(rows: list[Row]) -> list[str]:
    header = ["model, search", "ran", "NDCG@10", "MRR@10", "Recall@100", "adapt wall s", "adapt peak GiB", "load avg"]
    body = []
    for row in rows:
        cost = row.adapt
        gpu = cost.get("device", "cpu") != "cpu"
        extra = (
            [
                f"{cost['seconds']:.0f}"
                + (f" ({cost['device']})" if gpu else "")
                + (f" ({cost['parts']} parts: interrupted, resumed)" if cost.get("parts", 1) > 1 else ""),
                f"{cost['peak_rss_gib']:.1f}",
                f"{cost['load_before']}/{cost['load_after']}",
            ]
            if cost
            else ["-", "-", "-"]
        )
        body.append([row.name, row.choice or "bm25", *(f"{row.metrics[k]:.2f}" for k in METRICS), *extra])
    return markdown_table(header, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--methods", default="title,crop,title+crop")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--teacher", default=TEACHER)
    parser.add_argument(
        "--temperature", type=float, default=AdaptSettings.temperature, help="distill-kl's softmax temperature"
    )
    parser.add_argument(
        "--guide", default=None, help="in-batch methods: sbert adapt --guide MODEL (GISTEmbed's guided masking)"
    )
    parser.add_argument("--guide-margin", type=float, default=0.0, help="--guide's margin (0: GISTEmbed's)")
    parser.add_argument("--queries", type=int, default=None, help="quick runs: only the first N test queries")
    parser.add_argument("--documents", type=int, default=None, help="quick runs: relevant documents + N others")
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default="adapt.md")
    parser.add_argument("--device", default="cpu", help="where adapt trains and models embed (cpu, cuda)")
    parser.add_argument("--replace", action="store_true", help="write the table even if it drops earlier rows")
    parser.add_argument("--assemble", action="store_true", help="run nothing: the tables from the rows kept")
    args = parser.parse_args()
    quick = args.queries is not None or args.documents is not None
    if not args.assemble and any(m.startswith("distill") for m in re.split(r"[,+>]", args.methods)):
        try:  # a teacher not installed: said now, not after minutes of scoring the default model
            resolve(args.teacher)
        except ModelNotFoundError as err:
            raise SystemExit(f"--teacher {args.teacher}: {err}") from err
    began = time.perf_counter()
    results, runs = {}, {}
    for name in [] if args.assemble else args.collections.split(","):
        rows = _collection_rows(name, args)
        if quick:
            results[name], runs[name] = rows, ["this quick run"]
        else:
            run = f"{run_options(args)} ({time.strftime('%Y-%m-%d')}, {machine(args)})"
            results[name], runs[name] = keep_rows(name, rows, run)
    for name in [] if quick else COLLECTIONS:  # collections not run now: the rows kept from earlier runs
        if name not in results and record_path(name).is_file():
            results[name], runs[name] = read_record(name)
    order = [*COLLECTIONS, *(n for n in results if n not in COLLECTIONS)]  # the same order, however run
    results = {name: results[name] for name in order if name in results}
    ran = (
        "assembled from the rows kept (nothing run)"
        if args.assemble
        else (
            f"`python -m benchmarks.adapt --collections {args.collections} {run_options(args)}`; wall time of "
            f"this run {time.perf_counter() - began:.0f} s"
        )
    )
    lines = document_lines(results, runs, ran, args.steps)
    lost = [] if quick or args.replace else rows_lost(DOC, BEGIN, END, lines[2:])
    if lost:  # a record missing (not committed?): a partial run must not drop the doc's other rows
        (WORK / "adapt").mkdir(parents=True, exist_ok=True)
        (WORK / "adapt" / args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
        raise SystemExit(
            f"{len(lost)} row(s) of benchmarks/results/retrieval-evidence.md's table are in neither this run nor "
            f"{RECORDS / 'adapt'} (first: {lost[0]}); wrote {WORK / 'adapt' / args.out} only. Run their "
            "--methods too, or pass --replace to drop them."
        )
    if quick:  # checks that it runs: printed, nothing written
        print("\n".join(lines))
        return
    write_result(args.out, lines)
    write_between_markers(DOC, BEGIN, END, lines[2:])


def document_lines(results: dict[str, list[Row]], runs: dict[str, list[str]], ran: str, steps: int) -> list[str]:
    """The result file's lines (a title, then what goes between the doc's markers)."""
    lines = ["# Label-free adaptation and search choice: measured", ""]
    for name, rows in results.items():
        lines += [f"## {name} (headline {HEADLINE[name]})", "", *table(rows + supervised_rows(name)), ""]
    lines += ["## Every way of searching, default model", "", *choices_table(results), ""]
    lines += ["## Chosen on one collection, reported on the other", "", "Adapt method:", ""]
    apart = "Where the collections choose apart, the default is the method best on average:"
    lines += [*transfer_lines(results), "", apart, "", *average_lines(results), ""]
    lines += ["Way of searching (the default a user who passes no option gets):", ""]
    lines += [*search_transfer_lines(results), ""]
    guided = guide_lines(results)
    if guided:
        lines += ["With `--guide` (GISTEmbed's guided masking; an option, so not among the methods chosen above):", ""]
        lines += [*guided, ""]
    lines += [
        f"Command: {ran}. Adapted on the collection's documents only (no queries, no judgments), "
        f"{steps} steps at batch 32 unless a run below says otherwise; 'ran' is the "
        "way of searching scored (sbert.search.auto.CHOICES); '--auto' chose it on 200 pseudo-queries held out "
        "from the documents, titles alone (--auto-query-kind title, the kind every row here was first measured "
        "with, and the best on them, as before --auto kept the default way of searching within a standard error; "
        "the default kind, mixed, and that rule are measured by benchmarks/auto_kinds.py); 'best with test "
        "labels' is the ceiling, chosen on the very queries it is scored on. "
        "'load avg' is the 1-minute load before/after the adapt run (other jobs may share the 2 cores)."
        + (
            " Rows 'fine-tuned' are not label-free: they train on openoffice-dups' older 80% of queries and their "
            "judged duplicates (benchmarks/batches.py, on the CPU, seed 42; its table has the recipe and cost)."
            if any(supervised_rows(name) for name in results)
            else ""
        )
        + (
            " Rows 'fine-tuned with labels' are not label-free either: the default model (or the adapted one) "
            "trained on the collection's training judgments by benchmarks/finetune_retrieval.py's recipe, run as "
            "`sbert mine-negatives DIR --split train --num-negatives 1 --range-min 10 --range-max 50 "
            "--relative-margin 0.05 --keep-incomplete` (the default model mines) and `sbert train --model BASE "
            "--objective mnrl --format ntuples --batch-size 32 --epochs E` (E: 1 for SciFact, 2 for "
            "openoffice-dups); their wall time is the training's."
            if any(row.labels for rows in results.values() for row in rows)
            else ""
        ),
        "",
        "Rows are kept in benchmarks/results/records/adapt (a row measured again replaces its earlier self; "
        "none is dropped). The runs behind them:",
        "",
        *(f"- {name}: " + "; ".join(runs.get(name, [])) for name in results),
        "",
        "This invocation's machine and versions (each run above names its own):",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers", "bm25s")),
    ]
    return lines


if __name__ == "__main__":
    main()
