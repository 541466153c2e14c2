"""Batches that never fight the labels, measured: openoffice-dups fine-tuned four ways, same recipe.

The recipe of benchmarks/finetune_retrieval.py (negatives mined by the default model, ``mnrl`` at batch
32, two epochs, lr 2e-5, 10% warm-up, seed 42) on the older 80% of openoffice-dups' queries, scored on
the newest 20% (MRR@10, the headline; NDCG@10; dense, as the fine-tuned row of docs/retrieval.md, and
as a default index is searched: + BM25, weighted, alpha 0.7). Variants (``--variants``):

- ``plain``: shuffled batches, nothing kept apart (what the 66.93 of docs/retrieval.md trained on);
- ``sampler``: ``NoDuplicatesBatchSampler`` (the default): no batch holds a text twice, so a master
  report that several duplicates point to is never another row's in-batch negative;
- ``guide``: the sampler and GISTEmbed's guided masking, the guide all-mpnet-base-v2 (``--guide``):
  in-batch candidates it scores above the row's positive are left out of the softmax;
- ``adapted``: supervised after adapt: the sampler's batches, from the default model first adapted to the
  collection's documents, label-free, by ``sbert adapt``'s default method (``benchmarks/adapt.py``'s
  model, made by the same command and kept there; adapt reads no query, so no test query leaks in).

Each row is kept, committed, in benchmarks/results/records/batches (``<variant>.json`` for the CPU at seed 42, else
``<variant>-seed<N>-<cpu|gpu>.json``; a killed run loses one row); every row kept is tabled, with means
over seeds per device;
the table goes to benchmarks/results/batches.md and docs/retrieval.md. Cost on 2 CPU cores: mining ~4
minutes, then ~27 s a step (query, duplicate and negative at 256 tokens, batch 32), 124 steps: about an
hour a variant on a quiet machine. The guide (all-mpnet-base-v2, 384 tokens) embeds every text it has
not seen: the first epoch's steps took ~100 s each here (5 steps in 507 s, tests sharing the cores), the
second epoch's cost what the sampler's do (the guide keeps its vectors): about 1.5-2 hours on 2 cores.
On an H100 (``--device cuda``) a variant trains in 15-26 s: all three at three seeds in a few minutes.

    python benchmarks/batches.py [--variants plain,sampler,guide] [--guide all-mpnet-base-v2] [--seeds 42,43,44]
                                 [--device cuda]
    python benchmarks/batches.py --variants ""   # no training: the table again from the rows kept
    python benchmarks/batches.py --quick   # 4 steps, 40 test queries: checks that it runs (no docs)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

from common import (
    RECORDS,
    WORK,
    device_name,
    environment_lines,
    markdown_table,
    versions,
    write_between_markers,
    write_record,
    write_result,
)
from finetune_retrieval import mined_examples, split_collection, training_config
from retrieval import sample

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "retrieval.md"
BEGIN, END = "<!-- benchmarks/batches.py: begin -->", "<!-- benchmarks/batches.py: end -->"
VARIANTS = ("plain", "sampler", "guide", "adapted")
NAME = "openoffice-dups"


def train_variant(variant: str, examples: list, args, out: Path) -> dict:
    """Fine-tune the default model with ``variant``'s batches; what it cost and what the sampler moved."""
    from sbert.losses.in_batch import Guide, MultipleNegativesRankingLoss
    from sbert.training import Objective, Trainer
    from sbert.training.recipe import build_encoder

    config = training_config(NAME, args.train_steps, no_duplicates=variant != "plain", seed=args.seed)
    guide = Guide(args.guide) if variant == "guide" else None
    loss = MultipleNegativesRankingLoss(20.0, guide=guide)
    base = str(adapted_base(args)) if variant == "adapted" else "default"
    load = os.getloadavg()[0]
    trainer = Trainer(build_encoder(base, device=args.device), [Objective(examples, loss, NAME)], config, out)
    summary = trainer.train()
    return {
        "variant": variant,
        "seed": args.seed,
        "device": device_name(args.device),
        "versions": versions("torch", "transformers"),
        "steps": summary["steps"],
        "train_seconds": summary["seconds"],
        "moved": sum(trainer.moved.values()),
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def adapted_base(args) -> Path:
    """The default model adapted to openoffice-dups' documents by ``sbert adapt``'s default method, at 100
    steps (``--quick``: 2) and seed 42 (``benchmarks/adapt.py``'s folder for it, made by its command when missing)."""
    from adapt import adapted

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

    collection = sample(read_beir(split_collection(NAME, args.data), "test"), args.queries, args.documents)
    model = sbert.load(model_dir, device=args.device)
    out = {}
    for label, settings in (("dense", RetrievalSettings()), ("default", RetrievalSettings(hybrid=True))):
        found = RetrievalEvaluator(collection, NAME, retriever=settings.retriever(), latency_queries=0)(model)
        out[label] = {key: found[key] for key in ("mrr@10", "ndcg@10", "recall@100")}
    out["queries"] = len(collection.queries)
    return out


def cache_name(variant: str, args) -> str:
    """Where a row is kept: ``<variant>.json`` for the CPU at seed 42 (the first runs), else by seed and device."""
    if args.seed == 42 and args.device == "cpu":
        return f"{variant}.json"
    return f"{variant}-seed{args.seed}-{'cpu' if args.device == 'cpu' else 'gpu'}.json"


def run_variant(variant: str, examples: list, args, work: Path) -> dict:
    model_dir = work / cache_name(variant, args).replace(".json", "-model")
    began = time.perf_counter()
    row = train_variant(variant, examples, args, model_dir)
    row.update(score(model_dir, args))
    row["wall_seconds"] = round(time.perf_counter() - began)
    row["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 1)
    return row


def judged_pairs(data: str | None) -> int:
    """The training rows without mining them: one per judged pair (queries without a negative are kept)."""
    from sbert.data.beir import read_beir

    train = read_beir(split_collection(NAME, data), "train")
    return sum(1 for judged in train.qrels.values() for grade in judged.values() if grade > 0)


def kept_rows(work: Path) -> list[dict]:
    """Every row kept in ``work`` (rows of the first runs lack variant, seed and device: the CPU, seed 42)."""
    rows = []
    for path in sorted(work.glob("*.json")):
        row = json.loads(path.read_text())
        rows.append({"variant": path.stem.split("-")[0], "seed": 42, "device": "cpu", **row})
    order = {v: i for i, v in enumerate(VARIANTS)}
    return sorted(rows, key=lambda r: (r["device"] != "cpu", r["device"], order[r["variant"]], r["seed"]))


def table(rows: list[dict]) -> list[str]:
    header = ["batches", "ran on", "seed", "MRR@10 dense", "NDCG@10 dense", "MRR@10 default search"]
    header += ["NDCG@10 default search", "rows moved by the sampler", "steps", "train s", "load avg before/after"]
    body = []
    for r in rows:
        d, h = r["dense"], r["default"]
        body.append([r["variant"], r["device"], str(r["seed"]), f"{d['mrr@10']:.2f}", f"{d['ndcg@10']:.2f}"])
        body[-1] += [f"{h['mrr@10']:.2f}", f"{h['ndcg@10']:.2f}", f"{r['moved']:,}", str(r["steps"])]
        body[-1] += [f"{r['train_seconds']:.0f}", "/".join(map(str, r["load"]))]
    return markdown_table(header, body)


def mean_lines(rows: list[dict]) -> list[str]:
    """Mean and spread over seeds, per (device, variant) run with more than one seed."""
    import statistics

    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["device"], r["variant"]), []).append(r)
    lines = []
    for (device, variant), group in groups.items():
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


def missing_lines(rows: list[dict]) -> list[str]:
    """What the table lacks and where to look instead (a variant neither run now nor kept from a run)."""
    missing = [v for v in VARIANTS if v not in {r["variant"] for r in rows}]
    if not missing:
        return []
    note = (
        "; the plain recipe's own earlier run is docs/retrieval.md's row 'fine-tuned, truncated at 256 tokens' "
        "(benchmarks/retrieval.py), dense, same split and recipe"
        if "plain" in missing
        else ""
    )
    return ["", f"Not run (no row kept in benchmarks/.work/batches): {', '.join(missing)}{note}."]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--guide", default="all-mpnet-base-v2", help="the guide model of the 'guide' variant")
    parser.add_argument("--data", default=None)
    parser.add_argument("--train-steps", type=int, default=None)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--documents", type=int, default=None)
    parser.add_argument("--seeds", default="42", help="training seeds, comma-separated (rows are kept per seed)")
    parser.add_argument("--device", default="cpu", help="where it trains and embeds (cpu, cuda)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.train_steps, args.queries, args.documents = 4, 40, 200
    unknown = set(filter(None, args.variants.split(","))) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(VARIANTS)}")
    return args


def main() -> None:
    args = arguments()
    work = WORK / ("batches-quick" if args.quick else "batches")  # trained models
    kept = work if args.quick else RECORDS / "batches"  # measured rows, committed (quick ones are not)
    work.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    wanted = list(filter(None, args.variants.split(",")))
    examples = mined_examples(NAME, args.data, args.device) if wanted else None
    for seed in map(int, args.seeds.split(",")):
        args.seed = seed
        for variant in wanted:
            print(f"{variant}: training (seed {args.seed}, {args.device})", flush=True)
            row = run_variant(variant, examples, args, work)
            write_record(kept / cache_name(variant, args), row)
    import torch

    rows = kept_rows(kept)
    queries = rows[0]["queries"] if rows else 0
    count = len(examples) if examples is not None else judged_pairs(args.data)  # one row per judged pair
    lines = [
        f"openoffice-dups split in time: fine-tuned on the older 80% ({count:,} rows: query, duplicate, "
        f"one mined negative), scored on the newest 20% ({queries} queries). The recipe of "
        "benchmarks/finetune_retrieval.py for every row; only the batches (and where said, the seed) differ, and "
        "'adapted' starts from the default model adapted label-free to the collection's documents (`sbert adapt "
        "default --corpus openoffice-dups`, its default method, 100 steps) instead of the default model. "
        "'default search': the fine-tuned model searched as a default index is (BM25 fused, weighted, alpha 0.7). "
        "'ran on': cpu is the machine below; rows on a GPU ran in a GPU session with the same code (`--device "
        "cuda`), where the default model's weights travelled rounded to float16 (then run in float32): compare "
        "rows of one device only. Rows kept from earlier runs are read back, not re-run. Wall time of this run "
        f"{time.perf_counter() - began:.0f} s.",
        "",
        *table(rows),
        *mean_lines(rows),
        *missing_lines(rows),
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers", "bm25s")),
    ]
    if args.quick:
        print("\n".join(lines))
        return
    write_result("batches.md", ["# Batches that never fight the labels: measured", "", *lines])
    write_between_markers(DOC, BEGIN, END, lines)


if __name__ == "__main__":
    main()
