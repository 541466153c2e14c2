"""Batches that never fight the labels, measured: openoffice-dups fine-tuned four ways, same recipe.

The recipe of benchmarks/finetune_retrieval.py (negatives mined by the default model, ``mnrl`` at batch
32, two epochs, lr 2e-5, 10% warm-up, seed 42) on the older 80% of openoffice-dups' queries, scored on
the newest 20% (MRR@10, the headline; NDCG@10; dense, as the fine-tuned row of results/retrieval.md, and
as a default index is searched: + BM25, weighted, alpha 0.7). Variants (``--variants``):

- ``plain``: shuffled batches, nothing kept apart (what the fine-tuned row of results/retrieval.md trained on);
- ``sampler``: ``NoDuplicatesBatchSampler`` (the default): no batch holds a text twice, so a master
  report that several duplicates point to is never another row's in-batch negative;
- ``guide``: the sampler and GISTEmbed's guided masking, the guide all-mpnet-base-v2 (``--guide``):
  in-batch candidates it scores above the row's positive are left out of the softmax;
- ``adapted``: supervised after adapt: the sampler's batches, from the default model first adapted to the
  collection's documents, label-free, by ``sbert adapt``'s default method (``benchmarks/adapt.py``'s
  model, made by the same command and kept there; adapt reads no query, so no test query leaks in).

The guide's margin is GISTEmbed's (absolute, 0: a candidate the guide scores above the positive is
dropped) unless ``--guide-margins`` lists others (one row each; below 0 drops fewer). A margin is chosen
with ``--dev``, never on the test queries: the training queries are cut again in time, the model trains
on their older 80% and is scored on their newest 20% (rows in benchmarks/results/records/batches-dev,
table between its own markers of results/retrieval-evidence.md); the margin chosen there then runs on the test split.

Each row is kept, committed, in benchmarks/results/records/batches (``<variant>.json`` for the CPU at seed 42,
else ``<variant>-seed<N>-<cpu|gpu>.json``). A row kept already is skipped unless ``--again``, and a row
stopped by SIGTERM or Ctrl-C goes on from its checkpoint, so the same command run again goes on where it
stopped. Every row kept is tabled, with means over seeds per device; a CPU row names its processor. The table
goes to benchmarks/results/batches.md and between markers in results/retrieval-evidence.md. Cost on 2 CPU
cores: mining ~4 minutes, then ~15-27 s a step (Intel Xeon / AMD EPYC; query, duplicate and negative at 256
tokens, batch 32), 124 steps: 30-60 minutes a variant on a quiet machine. The guide (all-mpnet-base-v2) first
embeds every text of the training rows (the dev split's 3,225 in 5-9 minutes on 2 cores) and keeps the vectors
in ``.work/guide-vectors/`` for later runs; one guide serves every row of a run, so a guide row then costs
what a sampler row costs. It reads texts at its own 384 tokens, where ``sbert train --guide`` cuts them to the
student's 256 (as sentence-transformers' guide reads them): every row of these tables was measured so, and
only the texts longer than 256 tokens (about 7% here) would have other guide vectors. On an H100 (``--device
cuda``) a variant trains in 15-26 s: all three at three seeds in a few minutes.

    python -m benchmarks.batches [--variants plain,sampler,guide] [--guide all-mpnet-base-v2] [--seeds 42,43,44]
                                 [--guide-margins 0,-0.05,-0.1] [--margin-strategy absolute] [--device cuda]
    python -m benchmarks.batches --dev --variants sampler,guide --guide-margins 0,-0.05,-0.1 --seeds 42,43,44
    python -m benchmarks.batches --variants ""   # no training: the table again from the rows kept
    python -m benchmarks.batches --quick   # 4 steps, 40 test queries: checks that it runs (no docs)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from benchmarks.finetune_retrieval import mined_examples, training_config
from benchmarks.lib import (
    RECORDS,
    RESULTS,
    ROOT,
    WORK,
    cpu_name,
    device_name,
    environment_lines,
    markdown_table,
    versions,
    write_between_markers,
    write_record,
    write_result,
)
from benchmarks.lib.retrieval_data import sample, split_collection

DOC = RESULTS / "retrieval-evidence.md"
BEGIN, END = "<!-- benchmarks/batches.py: begin -->", "<!-- benchmarks/batches.py: end -->"
DEV_BEGIN, DEV_END = "<!-- benchmarks/batches.py --dev: begin -->", "<!-- benchmarks/batches.py --dev: end -->"
VARIANTS = ("plain", "sampler", "guide", "adapted")
NAME = "openoffice-dups"
GUIDES: dict = {}  # guide model -> its Teacher, for the whole run
DEV_MARGINS, DEV_SEEDS = (0.0, -0.05, -0.1), (42, 43, 44)  # the --dev sweep (results/batches-dev.md)


def train_variant(variant: str, examples: list, args, out: Path) -> dict:
    """Fine-tune the default model with ``variant``'s batches; what it cost and what the sampler moved."""
    from sbert.losses.in_batch import Guide, MultipleNegativesRankingLoss
    from sbert.training import Objective, Trainer, TrainingInterrupted
    from sbert.training.recipe import build_encoder

    config = training_config(NAME, args.train_steps, no_duplicates=variant != "plain", seed=args.seed)
    guide = None
    if variant == "guide":
        guide = Guide(guide_teacher(args.guide, examples, args.device), args.margin_strategy, args.guide_margin)
    loss = MultipleNegativesRankingLoss(20.0, guide=guide)
    base = str(adapted_base(args)) if variant == "adapted" else "default"
    load = os.getloadavg()[0]
    trainer = Trainer(build_encoder(base, device=args.device), [Objective(examples, loss, NAME)], config, out)
    try:
        summary = trainer.train(resume=(trainer.run_dir / "checkpoint.pt").is_file())  # a row stopped mid-way goes on
    except TrainingInterrupted as stop:  # a message, not a traceback: this script resumes without --resume
        print(
            f"{variant}: stopped by {signal.Signals(stop.signum).name} after step {stop.step:,} of "
            f"{stop.total_steps:,}; checkpoint {stop.checkpoint}; the same command goes on from there",
            file=sys.stderr,
        )
        raise SystemExit(stop.exit_code) from None
    for epoch in range(config.epochs):  # what the sampler moved in epochs a resumed run did not cut again
        trainer.epoch_plan(epoch)
    return {
        "variant": variant,
        **({"guide_margin": args.guide_margin, "margin_strategy": args.margin_strategy} if guide else {}),
        "seed": args.seed,
        "device": device_name(args.device),
        **({"cpu": cpu_name()} if args.device == "cpu" else {}),  # runs draw AMD or Intel processors
        "versions": versions("torch", "transformers"),
        "steps": summary["steps"],
        "steps_run": summary["steps_run"],  # fewer than steps: resumed, and train_seconds is this last part's
        "train_seconds": summary["seconds"],
        "moved": sum(trainer.moved.values()),
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def guide_teacher(path: str, examples: list, device: str):
    """One frozen guide per model for the whole run, already holding the vector of every text of ``examples``:
    read back from ``.work/guide-vectors/`` where an earlier run on this machine embedded them, else embedded
    once and kept there. Rows at other margins and seeds, and later runs, cost the
    guide nothing more."""
    import torch

    from sbert.atomic import atomic_file
    from sbert.losses.teachers import Teacher
    from sbert.training.sampling import example_texts

    if path in GUIDES:
        return GUIDES[path]
    teacher = GUIDES[path] = Teacher(path)
    kept = WORK / "guide-vectors" / f"{Path(path).name}-{teacher.model.max_seq_length}-{device.split(':')[0]}.pt"
    saved = torch.load(kept) if kept.is_file() else {"texts": [], "vectors": torch.empty(0, 0)}
    if saved["texts"]:
        teacher.remember(saved["texts"], saved["vectors"])
    known = set(saved["texts"])
    missing = sorted({t for example in examples for t in example_texts(example)} - known)
    print(f"  guide {path}: {len(known):,} texts' vectors read back from {kept}, {len(missing):,} to embed", flush=True)
    if missing:
        fresh = teacher.vectors(missing, torch.device(device), show_progress=True).cpu()
        vectors = torch.cat([saved["vectors"], fresh]) if known else fresh
        with atomic_file(kept, "wb") as handle:
            torch.save({"texts": saved["texts"] + missing, "vectors": vectors}, handle)
    return teacher


def adapted_base(args) -> Path:
    """The default model adapted to openoffice-dups' documents by ``sbert adapt``'s default method, at 100
    steps (``--quick``: 2) and seed 42 (``benchmarks/adapt.py``'s folder for it, made by its command when missing)."""
    from benchmarks.adapt import adapted
    from sbert.adapt.methods import DEFAULT_METHOD

    steps = 2 if args.quick else 100
    settings = argparse.Namespace(data=args.data, steps=steps, seed=42, device=args.device, teacher=None)
    return adapted(NAME, DEFAULT_METHOD, settings)[0]


def score(model_dir: Path, args) -> dict:
    """MRR@10 / NDCG@10 on the newest 20%: dense, and as a default index is searched (hybrid 0.7)."""
    import sbert
    from sbert.data.beir import read_beir
    from sbert.evaluation.retrieval import RetrievalEvaluator
    from sbert.evaluation.retrievers import RetrievalSettings

    collection = sample(read_beir(args.folder, "test"), args.queries, args.documents)
    model = sbert.load(model_dir, device=args.device)
    out = {}
    for label, settings in (("dense", RetrievalSettings()), ("default", RetrievalSettings(hybrid=True))):
        found = RetrievalEvaluator(collection, NAME, retriever=settings.retriever(), latency_queries=0)(model)
        out[label] = {key: found[key] for key in ("mrr@10", "ndcg@10", "recall@100")}
    out["queries"] = len(collection.queries)
    return out


def dev_collection(data: str | None) -> Path:
    """openoffice-dups' training queries cut again in time (``--dev``): the older 80% train, the newest 20%
    are the dev queries scored; the test queries are never read."""
    from sbert.data.time_split import split_by_time

    out = WORK / "retrieval" / "openoffice-dups-dev-split"
    if not (out / "split.json").is_file():
        info = split_by_time(split_collection(NAME, data), out, split="train", train_fraction=0.8)
        print(f"{NAME}: training queries cut in time at {info.cutoff}: {info.train_queries} / {info.test_queries}")
    return out


def guide_tag(margin: float, strategy: str) -> str:
    """A guide's margin and strategy where they are not GISTEmbed's (absolute, 0): ``""`` or e.g. ``absolute-0.1``."""
    return "" if margin == 0 and strategy == "absolute" else f"{strategy}{margin:g}"


def cache_name(variant: str, args) -> str:
    """Where a row is kept: ``<variant>.json`` for the CPU at seed 42 (the first runs), else by seed and
    device; a guide at another margin than GISTEmbed's names it (``guide-absolute-0.1-seed42-cpu.json``)."""
    tag = guide_tag(args.guide_margin, args.margin_strategy) if variant == "guide" else ""
    if args.seed == 42 and args.device == "cpu" and not tag:
        return f"{variant}.json"
    return f"{variant}{'-' + tag if tag else ''}-seed{args.seed}-{'cpu' if args.device == 'cpu' else 'gpu'}.json"


def ran_on(row: dict) -> str:
    """Where a row trained: the GPU's name, or ``cpu`` and its processor, shortened (``cpu (Intel Xeon)``)."""
    if row["device"] != "cpu" or "cpu" not in row:
        return row["device"]
    name = re.sub(r"\((R|TM)\)|\b(Processor|CPU)\b|@.*", "", row["cpu"])
    return f"cpu ({' '.join(name.split())})"


def label(row: dict) -> str:
    """A row's batches as the table names them: the variant, and a guide's margin (0 is GISTEmbed's)."""
    margin, strategy = row.get("guide_margin", 0.0), row.get("margin_strategy", "absolute")
    if row["variant"] != "guide":
        return row["variant"]
    return f"guide, margin {margin:g}{' (relative)' if strategy == 'relative' else ''}"


def run_variant(variant: str, examples: list, args, work: Path) -> dict:
    model_dir = work / cache_name(variant, args).replace(".json", "-model")
    began = time.perf_counter()
    row = train_variant(variant, examples, args, model_dir)
    row.update(score(model_dir, args))
    row["wall_seconds"] = round(time.perf_counter() - began)
    row["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 1)
    return row


def judged_pairs(folder: Path) -> int:
    """The training rows without mining them: one per judged pair (queries without a negative are kept)."""
    from sbert.data.beir import read_beir

    train = read_beir(folder, "train")
    return sum(1 for judged in train.qrels.values() for grade in judged.values() if grade > 0)


def kept_rows(work: Path) -> list[dict]:
    """Every row kept in ``work`` (rows of the first runs lack variant, seed and device: the CPU, seed 42)."""
    rows = []
    for path in sorted(work.glob("*.json")):
        row = json.loads(path.read_text())
        rows.append({"variant": path.stem.split("-")[0], "seed": 42, "device": "cpu", **row})
    order = {v: i for i, v in enumerate(VARIANTS)}
    return sorted(
        rows,
        key=lambda r: (r["device"] != "cpu", r["device"], order[r["variant"]], -r.get("guide_margin", 0.0), r["seed"]),
    )


def table(rows: list[dict]) -> list[str]:
    header = ["batches", "ran on", "seed", "MRR@10 dense", "NDCG@10 dense", "MRR@10 default search"]
    header += ["NDCG@10 default search", "rows moved by the sampler", "steps", "train s", "load avg before/after"]
    body = []
    for r in rows:
        d, h = r["dense"], r["default"]
        body.append([label(r), ran_on(r), str(r["seed"]), f"{d['mrr@10']:.2f}", f"{d['ndcg@10']:.2f}"])
        body[-1] += [f"{h['mrr@10']:.2f}", f"{h['ndcg@10']:.2f}", f"{r['moved']:,}", str(r["steps"])]
        resumed = r.get("steps_run", r["steps"]) < r["steps"]
        seconds = f"{r['train_seconds']:.0f}" + (f" (its last {r['steps_run']} steps: resumed)" if resumed else "")
        body[-1] += [seconds, "/".join(map(str, r["load"]))]
    return markdown_table(header, body)


def seed_groups(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """The rows of each (device, batches as labelled): one per seed run."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["device"], label(r)), []).append(r)
    return groups


def mean_lines(rows: list[dict]) -> list[str]:
    """Mean and spread over seeds, per (device, variant) run with more than one seed."""
    import statistics

    lines = []
    for (device, variant), group in seed_groups(rows).items():
        if len(group) < 2:
            continue
        dense = [r["dense"]["mrr@10"] for r in group]
        default = [r["default"]["mrr@10"] for r in group]
        lines.append(
            f"- {variant} on {device}, {len(group)} seeds: MRR@10 dense {statistics.mean(dense):.2f} "
            f"(min {min(dense):.2f}, max {max(dense):.2f}), default search {statistics.mean(default):.2f} "
            f"(min {min(default):.2f}, max {max(default):.2f})"
        )
    return ["", "Over seeds:", "", *lines] if lines else []


def missing_lines(rows: list[dict], kept: Path, dev: bool) -> list[str]:
    """What the table lacks and where to look instead (a variant neither run now nor kept from a run)."""
    missing = [v for v in (("sampler", "guide") if dev else VARIANTS) if v not in {r["variant"] for r in rows}]
    if not missing:
        return []
    note = (
        "; the plain recipe's own earlier run is results/retrieval.md's row 'fine-tuned, truncated at 256 tokens' "
        "(python -m benchmarks.retrieval), dense, same split and recipe"
        if "plain" in missing and not dev
        else ""
    )
    where = kept.relative_to(ROOT) if kept.is_relative_to(ROOT) else kept
    return ["", f"Not run (no row kept in {where}): {', '.join(missing)}{note}."]


def choice_lines(rows: list[dict]) -> list[str]:
    """``--dev``: per device, the guide's margin (of ``DEV_MARGINS``) whose rows score best on the dev queries
    (mean dense MRR@10 over ``DEV_SEEDS``), beside the sampler's: what the test split then runs. Chosen only
    once the sweep is whole on that device (rows from several runs fill it in)."""
    lines = []
    for device in dict.fromkeys(r["device"] for r in rows):
        kept = {_sweep_key(r): r for r in rows if r["device"] == device}
        wanted = [("sampler", None, s) for s in DEV_SEEDS] + [("guide", m, s) for m in DEV_MARGINS for s in DEV_SEEDS]
        have = [kept[key] for key in wanted if key in kept]
        where = _where(have)
        if len(have) < len(wanted):
            lines.append(
                f"Not chosen yet on {device}: {len(have)} of the sweep's {len(wanted)} rows kept{where} (the "
                f"sampler and the guide at margins {', '.join(f'{m:g}' for m in DEV_MARGINS)}, seeds "
                f"{', '.join(map(str, DEV_SEEDS))}); the same command goes on where it stopped."
            )
            continue
        means = {m: _sweep_mean(kept, "guide", m) for m in DEV_MARGINS}
        best = max(DEV_MARGINS, key=means.__getitem__)
        each = ", ".join(f"{m:g}: {means[m]:.2f}" for m in DEV_MARGINS)
        lines.append(
            f"Chosen on these dev queries ({device}): margin {best:g}, mean MRR@10 dense over seeds "
            f"{', '.join(map(str, DEV_SEEDS))} by margin {each}; the sampler {_sweep_mean(kept, 'sampler', None):.2f}. "
            f"The test split runs it with `--guide-margins {best:g}`.{f' Its rows: {where[2:]}.' if where else ''}"
        )
    return ["", *lines] if lines else []


def _where(rows: list[dict]) -> str:
    """Which processors ran CPU ``rows``, where more than one did: ``", 6 on AMD EPYC, 1 on Intel Xeon"``."""
    counts = Counter(map(ran_on, rows))
    if len(counts) < 2:
        return ""
    return ", " + ", ".join(f"{n} on {name.removeprefix('cpu (').removesuffix(')')}" for name, n in counts.items())


def _sweep_key(row: dict) -> tuple:
    """(variant, the guide's absolute margin or None, seed): a row's place in the dev sweep."""
    relative = row.get("margin_strategy") == "relative"
    margin = row.get("guide_margin", 0.0) if row["variant"] == "guide" and not relative else None
    return row["variant"] if not relative else "guide (relative)", margin, row["seed"]


def _sweep_mean(kept: dict, variant: str, margin: float | None) -> float:
    import statistics

    return statistics.mean(kept[variant, margin, seed]["dense"]["mrr@10"] for seed in DEV_SEEDS)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--guide", default="all-mpnet-base-v2", help="the guide model of the 'guide' variant")
    parser.add_argument(
        "--guide-margins",
        default="0",
        help="the guide's margins, comma-separated: one 'guide' row each (0: GISTEmbed's; below 0 masks less)",
    )
    parser.add_argument("--margin-strategy", default="absolute", choices=("absolute", "relative"))
    parser.add_argument(
        "--dev",
        action="store_true",
        help="train on the older 80%% of the training queries and score the newest 20%% of them (choose here)",
    )
    parser.add_argument("--data", default=None)
    parser.add_argument("--train-steps", type=int, default=None)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--documents", type=int, default=None)
    parser.add_argument("--seeds", default="42", help="training seeds, comma-separated (rows are kept per seed)")
    parser.add_argument("--device", default="cpu", help="where it trains and embeds (cpu, cuda)")
    parser.add_argument("--again", action="store_true", help="train rows already kept anew (else they are skipped)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.train_steps, args.queries, args.documents, args.again = 4, 40, 200, True
    try:
        args.margins = [float(m) for m in args.guide_margins.split(",")]
    except ValueError:
        parser.error(f"--guide-margins: expected numbers separated by commas, got {args.guide_margins!r}")
    args.guide_margin = args.margins[0]
    unknown = set(filter(None, args.variants.split(","))) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(VARIANTS)}")
    return args


def main() -> None:
    args = arguments()
    part = "batches-dev" if args.dev else "batches"
    work = WORK / (f"{part}-quick" if args.quick else part)  # trained models
    kept = work if args.quick else RECORDS / part  # measured rows, committed (quick ones are not)
    work.mkdir(parents=True, exist_ok=True)
    args.folder = dev_collection(args.data) if args.dev else split_collection(NAME, args.data)
    began, trained = time.perf_counter(), 0
    wanted = list(filter(None, args.variants.split(",")))
    examples = mined_examples(NAME, args.data, args.device, args.folder) if wanted else None
    for seed in map(int, args.seeds.split(",")):
        args.seed = seed
        for variant in wanted:
            for margin in args.margins if variant == "guide" else args.margins[:1]:
                args.guide_margin = margin
                tag = guide_tag(margin, args.margin_strategy) or "margin 0"
                if (kept / cache_name(variant, args)).is_file() and not args.again:
                    print(f"{variant}: kept already (seed {args.seed}, {args.device}, {tag}); --again trains it anew")
                    continue
                print(f"{variant}: training (seed {args.seed}, {args.device}, {tag})")
                row = run_variant(variant, examples, args, work)
                write_record(kept / cache_name(variant, args), row)
                trained += 1
    import torch

    rows = kept_rows(kept)
    queries = rows[0]["queries"] if rows else 0
    count = len(examples) if examples is not None else judged_pairs(args.folder)  # one row per judged pair
    where = (
        f"openoffice-dups' training queries (the older 80% of its queries) split again in time, for choosing: "
        f"fine-tuned on their older 80% ({count:,} rows: query, duplicate, one mined negative), scored on their "
        f"newest 20% ({queries} dev queries); the test queries are not read."
        if args.dev
        else f"openoffice-dups split in time: fine-tuned on the older 80% ({count:,} rows: query, duplicate, "
        f"one mined negative), scored on the newest 20% ({queries} queries)."
    )
    lines = [
        f"{where} The recipe of "
        "benchmarks/finetune_retrieval.py for every row; only the batches (and where said, the seed) differ, and "
        "'adapted' starts from the default model adapted label-free to the collection's documents (`sbert adapt "
        "default --corpus openoffice-dups`, its default method, 100 steps) instead of the default model. "
        "'default search': the fine-tuned model searched as a default index is (BM25 fused, weighted, alpha 0.7). "
        "'ran on': a CPU row names its processor (runs draw AMD or Intel machines, whose float rounding "
        "differs, so a row need not repeat to the digit on the other; CPU rows are averaged together whichever ran "
        "them); rows on a GPU ran on a GPU machine with the same code (`--device cuda`), where the default model's "
        "weights travelled rounded to float16 (then run in float32): compare "
        "rows of one device only. Rows kept from earlier runs are read back, not re-run. "
        + (
            f"This run trained {trained} row{'s' * (trained != 1)} in {time.perf_counter() - began:.0f} s."
            if trained
            else "This run trained no row: the table is assembled from the rows kept."
        ),
        "",
        *table(rows),
        *mean_lines(rows),
        *(choice_lines(rows) if args.dev else []),
        *missing_lines(rows, kept, args.dev),
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers", "bm25s")),
    ]
    if args.quick:
        print("\n".join(lines))
        return
    if args.dev:
        write_result("batches-dev.md", ["# Batches that never fight the labels: chosen on dev queries", "", *lines])
        write_between_markers(DOC, DEV_BEGIN, DEV_END, lines)
        return
    write_result("batches.md", ["# Batches that never fight the labels: measured", "", *lines])
    write_between_markers(DOC, BEGIN, END, lines)


if __name__ == "__main__":
    main()
