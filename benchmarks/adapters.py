"""LoRA adapters against whole models: retrieval quality, training cost, folder size, and serving many
adapters on one base.

Quality and cost, for each collection (SciFact; openoffice-dups split in time, as benchmarks/adapt.py
splits it): ``sbert adapt default --corpus <collection>`` with sbert adapt's defaults (method, steps,
hold-out), whole (every weight trained) and with ``--lora`` at each ``--variants`` entry's rank and learning
rate; on openoffice-dups also supervised fine-tuning on its training part (benchmarks/finetune_retrieval.py's
recipe: mined negatives, ``sbert train --objective mnrl``), whole and ``--lora``. Each run is a command of
its own, so its wall time and peak memory are its own; each model is scored on the test queries through
benchmarks/adapt.py's rows (dense, and ``--auto`` chosen on the documents' pseudo-queries), beside the
default model's. The folder size is what ``--out`` holds (an adapter: no base weights).

Serving: ``sbert serve --model default`` on loopback, 32 clients sending the STSb test sentences (8 a
request) to /v1/embeddings, first plain (``model: default``), then with 1 and with 4 adapters (the adapters
trained above), the requests spread over them in turn (requests for different adapters never share a
batch: each adapter's batches fill from its own requests). Reported: sentences/s, p50/p99 latency and the server's peak
memory, each against the plain server in the same run.

Memory (``--memory``): the peak of a short ``sbert adapt`` (6 steps) whole and with each ``TARGETS`` set of
adapted layers: what the layers chosen cost while training.

The allocator (``--heap``): a short ``sbert adapt`` (30 steps), whole and ``--lora``, with glibc's own dynamic
mmap threshold and with it fixed (``MALLOC_MMAP_THRESHOLD_``) at 8 and at 1 MiB: what a fixed threshold saves
in memory (blocks above it are mapped for themselves and given back whole, so the heap does not grow on the
holes a step leaves) and costs in time (fresh pages for each large tensor), in one run.

Choosing without fooling ourselves: the default rank and LoRA learning rate are the variant with the best
``--auto`` score on ``--choose-on`` (openoffice-dups, the quicker to run); the other collection's rows are
the evidence for them. The last section sets the chosen variant against the whole model on each collection.

    python -m benchmarks.adapters [--collections scifact,openoffice-dups] [--variants full,lora8,lora16]
                                  [--supervised] [--serving] [--memory] [--heap] [--no-quality] [--recost]
    (--recost: adapt the kept variants again for their wall time and peak memory alone; the models must come
    out byte for byte the same, so the kept scores stand. --cost-only: the same without a kept model to
    compare with; the kept scores stand as measured, and the run line says so; with --supervised, the
    fine-tuning rows on openoffice-dups instead of its adapt rows)
    python -m benchmarks.adapters --assemble   # run nothing: the tables again from the rows kept
    (a variant: ``full``, or ``loraR``, with ``@LR`` for a learning rate other than sbert adapt's default:
    lora16@1e-4; rows name the rate they ran at)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.adapt import Row, fine_tuned, scored_model, timed_run
from benchmarks.lib import RECORDS, WORK, environment_lines, load_record, markdown_table, write_record, write_result
from benchmarks.lib.retrieval_data import sample, test_part
from sbert.data.paths import data_dir

COLLECTIONS = ("scifact", "openoffice-dups")
HEADLINE = {"scifact": "ndcg@10", "openoffice-dups": "mrr@10"}
SUPERVISED = "openoffice-dups"  # the collection with training judgments of its own (its older 80%)
VARIANT = re.compile(r"^(full|lora(\d+))(?:@([0-9.e-]+))?$")
RESULT = "adapters.md"


def record_path(name: str) -> Path:
    return RECORDS / "adapters" / f"{name}.json"


def variant_options(variant: str) -> list[str]:
    """The command-line options of ``variant`` (``full``, ``lora8``, ``lora16@1e-4``)."""
    found = VARIANT.match(variant)
    if not found:
        raise SystemExit(f"--variants: {variant!r} is not full or loraR[@LR] (lora16, lora8@1e-4)")
    options = ["--lora", "--lora-rank", found.group(2)] if found.group(2) else []
    return options + (["--lr", found.group(3)] if found.group(3) else [])


def folder_mb(folder: Path) -> float:
    """What a model folder holds on disk, in MB (10^6 bytes)."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 1e6


def adapt_command(name: str, variant: str, out: Path, args) -> list[str]:
    """``sbert adapt`` of the default model to ``name``'s documents with ``variant``'s options, into ``out``."""
    corpus = data_dir(args.data) / "retrieval" / name
    command = ["adapt", "default", "--corpus", str(corpus), "--out", str(out), "--device", args.device]
    return [*command, "--no-progress", *variant_options(variant)]


def adapted(name: str, variant: str, args) -> tuple[Path, dict]:
    """The default model adapted to ``name``'s documents with sbert adapt's defaults and ``variant``'s
    options (cached under benchmarks/.work/adapters), and its run's cost."""
    out = WORK / "adapters" / name / f"adapt-{variant}"
    record = out.with_name(out.name + ".json")
    if record.is_file() and out.is_dir():
        return out, load_record(record)
    command = adapt_command(name, variant, out, args)
    command += ["--resume"] if (out.with_name(out.name + ".train") / "checkpoint.pt").is_file() else []
    cost = timed_run(command, record, args)
    cost["folder_mb"] = round(folder_mb(out), 1)
    write_record(record, cost)
    return out, cost


WEIGHTS = ("adapter_model.safetensors", "model.safetensors")


def recost(name: str, variant: str, args) -> None:
    """Run a kept adapt again for its cost alone (wall time, peak memory: after a change that should move only
    those): the model it writes must equal the kept one byte for byte, or this stops (the kept scores would be
    stale: remove the model and its rows to score it anew). The kept record and rows then carry the new cost."""
    kept = WORK / "adapters" / name / f"adapt-{variant}"
    rows_file = WORK / "adapt" / name / f"adapt_{variant}-adapters-adapt-{variant}.rows.json"
    if not (kept.is_dir() and rows_file.is_file()):
        raise SystemExit(f"--recost: {kept} or its rows are not kept: run without --recost first")
    again = kept.with_name(kept.name + ".recost")
    command = [*adapt_command(name, variant, again, args), "--overwrite"]
    cost = timed_run(command, again.with_name(again.name + ".json"), args)
    for weights in WEIGHTS:
        if (kept / weights).is_file() and (kept / weights).read_bytes() != (again / weights).read_bytes():
            raise SystemExit(f"--recost: {again / weights} differs from the kept model's: score it anew")
    cost["folder_mb"] = round(folder_mb(again), 1)
    write_record(kept.with_name(kept.name + ".json"), cost)
    rows = json.loads(rows_file.read_text())
    write_record(rows_file, [{**row, "adapt": cost} for row in rows])
    print(f"{name} {variant}: {cost}", flush=True)


def cost_only(name: str, variant: str, args, kind: str = "adapt") -> None:
    """Adapt (``kind`` "adapt") or fine-tune ("train") ``variant`` afresh for its cost alone (wall time, peak
    memory) and put that on its kept rows, whose scores stay as they were measured: for a change that should
    move only the cost, where the kept model is not there for ``--recost`` to compare (the run line says
    "cost only")."""
    kept = load_record(record_path(name))
    label = f"{kind} {variant}"
    if not any(row["method"] == label for row in kept.get("rows", [])):
        raise SystemExit(f"--cost-only: {name} has no kept rows of {label}: run without --cost-only first")
    _, cost = {"adapt": adapted, "train": trained}[kind](name, variant, args)
    rows = [{**row, "adapt": cost} if row["method"] == label else row for row in kept["rows"]]
    write_record(record_path(name), {**kept, "rows": rows})
    print(f"{name} {variant}: {cost}", flush=True)


def trained(name: str, variant: str, args) -> tuple[Path, dict]:
    """The default model fine-tuned on ``name``'s training judgments (benchmarks/adapt.py's ``fine_tuned``)
    with ``variant``'s options."""
    key = f"adapters-train-{variant}"  # under .work/adapt/<name>, beside the mined negatives fine_tuned keeps
    out, cost = fine_tuned(name, "", key, False, args, tuple(variant_options(variant)))
    if "folder_mb" not in cost:
        cost["folder_mb"] = round(folder_mb(out), 1)
        write_record(out.with_name(out.name + ".json"), cost)
    return out, cost


def collection_rows(name: str, args) -> list[Row]:
    """The default model's rows, then each variant's adapted (and, on openoffice-dups with --supervised,
    fine-tuned) model's: dense and --auto (benchmarks/adapt.py's ``scored_model``; its rows cached there)."""
    collection = sample(test_part(name, args), None, None)
    print(f"{name}: {len(collection.queries)} test queries, {len(collection.corpus)} documents", flush=True)
    rows = scored_model(name, "default model", "", (lambda: ("default", {}), "default"), collection, False, "cpu")
    jobs = [("adapt", adapted)] + ([("train", trained)] if args.supervised and name == SUPERVISED else [])
    for kind, make in jobs:
        for variant in args.variants.split(","):
            variant_options(variant)  # refused before anything runs
            label = f"{kind} {variant}"
            build = (lambda m=make, v=variant: m(name, v, args)), f"adapters-{kind}-{variant}"
            rows += scored_model(name, label, label, build, collection, False, args.device)
    return [row for row in rows if row.search in ("dense", "auto")]


def keep(name: str, rows: list[Row], run: str) -> list[dict]:
    """``name``'s kept rows with these merged in (a row measured again replaces its earlier self)."""
    kept = load_record(record_path(name))
    fresh = {row.name: asdict(row) for row in rows}
    merged = [fresh.pop(row["name"], row) for row in kept.get("rows", [])] + list(fresh.values())
    write_record(record_path(name), {**kept, "runs": [*kept.get("runs", []), run], "rows": merged})
    return merged


def quality_table(name: str, rows: list[dict]) -> list[str]:
    """One collection's rows against the whole model's, same run, same search."""
    metric = HEADLINE[name]
    table = []
    for row in rows:
        cost = row["adapt"]
        kind = row["method"].split(" ")[0] if row["method"] else ""
        reference = next((r for r in rows if r["method"] == f"{kind} full" and r["search"] == row["search"]), None)
        versus = f"{row['metrics'][metric] - reference['metrics'][metric]:+.2f}" if reference and kind else "-"
        seconds = cost.get("seconds")
        table.append(
            [
                row["name"],
                row["choice"],
                f"{row['metrics']['ndcg@10']:.2f}",
                f"{row['metrics']['mrr@10']:.2f}",
                versus,
                f"{seconds:.0f}" if seconds else "-",
                f"{cost['peak_rss_gib']:.1f}" if cost.get("peak_rss_gib") else "-",
                f"{cost['folder_mb']:.1f}" if cost.get("folder_mb") else "-",
                f"{cost.get('load_before', '-')}/{cost.get('load_after', '-')}" if cost else "-",
            ]
        )
    header = ["model, search", "ran", "NDCG@10", "MRR@10", f"{metric} vs whole", "wall s", "peak GiB", "folder MB"]
    return [f"## {name} (headline {metric})", "", *markdown_table([*header, "load before/after"], table), ""]


def chosen_variant(rows: list[dict], name: str) -> str | None:
    """The LoRA variant whose label-free --auto row scores best on ``name`` (None before one is measured)."""
    metric = HEADLINE[name]
    candidates = [r for r in rows if r["method"].startswith("adapt lora") and r["search"] == "auto"]
    return max(candidates, key=lambda r: r["metrics"][metric])["method"].split(" ")[1] if candidates else None


def target_lines(variant: str) -> list[str]:
    """The chosen adapter against the whole model, per collection: --auto's headline metric, adapt's wall time
    and peak memory (same run), the folder."""
    table = []
    for name in COLLECTIONS:
        rows = {(r["method"], r["search"]): r for r in load_record(record_path(name)).get("rows", [])}
        whole, mine = rows.get(("adapt full", "auto")), rows.get((f"adapt {variant}", "auto"))
        if whole is None or mine is None:
            continue
        metric, cost, full = HEADLINE[name], mine["adapt"], whole["adapt"]
        table.append(
            [
                name,
                f"{mine['metrics'][metric]:.2f} vs {whole['metrics'][metric]:.2f} "
                f"({mine['metrics'][metric] - whole['metrics'][metric]:+.2f})",
                f"{cost['seconds'] / full['seconds']:.2f}x",
                f"{cost['peak_rss_gib']:.2f} vs {full['peak_rss_gib']:.2f} GiB",
                f"{cost['folder_mb']:.1f} vs {full['folder_mb']:.1f} MB",
            ]
        )
    header = ["collection", f"`--auto` headline, {variant} vs whole", "adapt wall time", "peak memory", "folder"]
    return [f"## {variant} against the whole model", "", *markdown_table(header, table), ""] if table else []


# -- peak memory by the layers adapted --------------------------------------------------------------------
TARGETS = {  # --lora-targets, from sbert adapt's default down to the original LoRA paper's
    "whole model": None,
    "query,key,value,dense (default)": "query,key,value,dense",
    "query,key,value,attention.output.dense": "query,key,value,attention.output.dense",
    "query,value": "query,value",
}


def memory_rows(args) -> dict:
    """Each ``TARGETS`` entry's peak memory in a short ``sbert adapt`` on openoffice-dups (``--steps 6``,
    everything else sbert adapt's default): what the adapted layers cost in memory while training."""
    from benchmarks.adapt import run_sbert

    corpus = data_dir(args.data) / "retrieval" / SUPERVISED
    found = {}
    for label, targets in TARGETS.items():
        out = WORK / "adapters" / "memory" / label.split(" ")[0].replace(",", "-")
        command = ["adapt", "default", "--corpus", str(corpus), "--out", str(out), "--steps", "6", "--no-progress"]
        command += ["--overwrite"] + (["--lora", "--lora-targets", targets] if targets else [])
        found[label] = {"peak_rss_gib": round(run_sbert(command), 2), "folder_mb": round(folder_mb(out), 1)}
        print(label, found[label], flush=True)
    return found


def memory_table(kept: dict) -> list[str]:
    if not kept:
        return []
    whole = kept["whole model"]["peak_rss_gib"]
    table = [
        [label, f"{row['peak_rss_gib']:.2f} ({row['peak_rss_gib'] - whole:+.2f})", f"{row['folder_mb']:.1f}"]
        for label, row in kept.items()
    ]
    header = ["layers adapted (--lora-targets)", "peak GiB (vs whole)", "folder MB"]
    lines = ["## Peak memory by the layers adapted (openoffice-dups, 6 steps)", ""]
    return [*lines, *markdown_table(header, table), ""]


# -- the allocator while training ----------------------------------------------------------------------------
ALLOCATORS = {  # the child's environment: what glibc's allocator does while sbert adapt runs
    "glibc's own (dynamic mmap threshold)": {},
    "MALLOC_MMAP_THRESHOLD_=8 MiB": {"MALLOC_MMAP_THRESHOLD_": str(8 << 20)},
    "MALLOC_MMAP_THRESHOLD_=1 MiB": {"MALLOC_MMAP_THRESHOLD_": str(1 << 20)},
}
HEAP_STEPS = 30


def heap_rows(args) -> dict:
    """Wall time and peak memory of a short ``sbert adapt`` on openoffice-dups (``--steps 30``), whole and
    ``--lora``, under each ``ALLOCATORS`` setting: what a fixed mmap threshold saves and what it costs."""
    from benchmarks.adapt import run_sbert

    corpus = data_dir(args.data) / "retrieval" / SUPERVISED
    found: dict[str, dict] = {}
    for label, env in ALLOCATORS.items():
        for kind, extra in (("whole", []), ("lora", ["--lora"])):
            out = WORK / "adapters" / "heap" / kind
            command = ["adapt", "default", "--corpus", str(corpus), "--out", str(out), "--steps", str(HEAP_STEPS)]
            load, began = os.getloadavg()[0], time.perf_counter()
            peak = run_sbert([*command, "--no-progress", "--overwrite", *extra], env)
            found.setdefault(label, {})[kind] = {
                "seconds": round(time.perf_counter() - began, 1),
                "peak_rss_gib": round(peak, 2),
                "load": f"{load:.2f}/{os.getloadavg()[0]:.2f}",
            }
            print(label, kind, found[label][kind], flush=True)
    return found


def heap_table(kept: dict) -> list[str]:
    if not kept:
        return []
    first = next(iter(kept.values()))
    table = [
        [
            label,
            *(f"{row[k]['seconds']:.0f} s ({row[k]['seconds'] / first[k]['seconds']:.2f}x)" for k in ("whole", "lora")),
            *(f"{row[k]['peak_rss_gib']:.2f}" for k in ("whole", "lora")),
            f"{row['lora']['peak_rss_gib'] - row['whole']['peak_rss_gib']:+.2f}",
            " ".join(row[k]["load"] for k in ("whole", "lora")),
        ]
        for label, row in kept.items()
    ]
    header = ["allocator", "whole: wall", "lora: wall", "whole: GiB", "lora: GiB", "lora vs whole GiB", "load"]
    lines = [f"## The allocator while training (openoffice-dups, {HEAP_STEPS} steps)", ""]
    return [*lines, *markdown_table(header, table), ""]


# -- serving ------------------------------------------------------------------------------------------------
def serving_rows(args) -> dict:
    """Sentences/s, p50/p99 and the server's peak memory: plain, 1 adapter, 4 adapters (same load)."""
    from benchmarks.lib.sentences import stsb_test_sentences
    from benchmarks.serve_load import free_port, load, peak_rss_mb, start_server

    trained = (WORK / "adapters").glob("*/adapt-lora*")
    folders = sorted(p for p in trained if (p / "adapter_config.json").is_file() and not p.name.endswith(".recost"))
    if len(folders) < 4:
        raise SystemExit(f"--serving needs 4 adapters trained first; found {len(folders)} under {WORK / 'adapters'}")
    texts = stsb_test_sentences(data_dir(args.data))
    payloads = [texts[i : i + 8] for i in range(0, len(texts), 8)] * args.passes
    setups = {"plain model": [], "1 adapter": folders[:1], "4 adapters": folders[:4]}
    found = {}
    for label, chosen in setups.items():
        names = tuple(f"a{i}" for i in range(len(chosen))) or ("default",)
        extra = [f"--adapter={n}={folder.resolve()}" for n, folder in zip(names, chosen, strict=False)]
        port = free_port()
        server = start_server(port, "torch", 5.0, ["--batch-size", "32", *extra])
        url = f"http://127.0.0.1:{port}/v1/embeddings"
        try:
            asyncio.run(load(url, [texts[:8]] * 32, 32, 30, "httpx", names))  # warm-up, every adapter
            result = asyncio.run(load(url, payloads, 32, args.time_limit, "httpx", names))
            peak = peak_rss_mb(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=60)
        found[label] = {
            "adapters": [str(f.relative_to(WORK)) for f in chosen],
            "sentences_per_s": result["sentences"] / result["wall"],
            "p50_ms": result["p50"],
            "p99_ms": result["p99"],
            "errors": len(result["errors"]),
            "requests": result["requests"],
            "peak": peak,
            "load": round(os.getloadavg()[0], 2),
        }
        print(label, found[label], flush=True)
    return found


def serving_table(kept: dict) -> list[str]:
    if not kept:
        return []
    plain = kept["plain model"]

    def mb(text: str) -> float:
        return float(text.replace(",", "").split()[0]) if text != "n/a" else float("nan")

    table = [
        [
            label,
            f"{row['requests']:,}",
            row["errors"],
            f"{row['sentences_per_s']:,.0f} ({row['sentences_per_s'] / plain['sentences_per_s']:.0%})",
            f"{row['p50_ms']:.0f} / {row['p99_ms']:.0f}",
            f"{row['peak']} ({mb(row['peak']) - mb(plain['peak']):+,.0f} MB)",
            row["load"],
        ]
        for label, row in kept.items()
    ]
    header = ["server", "requests", "errors", "sentences/s (vs plain)", "p50 / p99 ms", "peak memory (vs plain)"]
    return ["## Serving: one base, several adapters", "", *markdown_table([*header, "load after"], table), ""]


def assemble(args, run: str | None) -> None:
    lines = ["# LoRA adapters against whole models: measured", ""]
    lines += [
        "No raw (MLM-only) BERT ships here and no NLI training set can be had: every row starts from the",
        "default model (all-MiniLM-L6-v2), as it ships.",
        "",
    ]
    choose = chosen_variant(load_record(record_path(args.choose_on)).get("rows", []), args.choose_on)
    for name in COLLECTIONS:
        kept = load_record(record_path(name))
        if kept.get("rows"):
            lines += quality_table(name, kept["rows"])
    if choose:
        lines += [f"Chosen on {args.choose_on} (best `--auto` among the LoRA rows): **{choose}**.", ""]
        lines += target_lines(choose)
    lines += memory_table(load_record(record_path("memory")).get("targets", {}))
    lines += heap_table(load_record(record_path("heap")).get("allocators", {}))
    lines += serving_table(load_record(record_path("serving")).get("setups", {}))
    parts = (*COLLECTIONS, "memory", "heap", "serving")
    runs = sorted({r for name in parts for r in load_record(record_path(name)).get("runs", [])})
    lines += ["## Runs", "", *(f"- {r}" for r in runs), ""]
    import torch

    lines += environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers", "peft"))
    write_result(RESULT, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--variants", default="full,lora8,lora16")
    parser.add_argument("--supervised", action="store_true", help="also fine-tune on openoffice-dups' labels")
    parser.add_argument("--serving", action="store_true", help="the serving rows (needs 4 adapters trained)")
    parser.add_argument("--memory", action="store_true", help="peak memory by the layers adapted (short runs)")
    parser.add_argument("--heap", action="store_true", help="the allocator while training: cost and peak (short)")
    parser.add_argument("--no-quality", action="store_true", help="skip the quality rows (with --serving)")
    parser.add_argument("--choose-on", default="openoffice-dups", choices=COLLECTIONS)
    parser.add_argument("--passes", type=int, default=2, help="serving: times the sentence list is sent")
    parser.add_argument("--time-limit", type=float, default=120.0, help="serving: seconds per setup")
    parser.add_argument("--recost", action="store_true", help="adapt the kept variants again for their cost")
    parser.add_argument("--cost-only", action="store_true", help="run the variants again for their cost alone")
    parser.add_argument("--assemble", action="store_true", help="run nothing: the tables from the rows kept")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    args.steps, args.seed = None, 42  # read by benchmarks/adapt.py's helpers: sbert adapt's and train's own
    from benchmarks.adapt import machine

    run = f"{machine(args)}: python -m benchmarks.adapters --variants {args.variants}"
    run += " --recost" if args.recost else ""
    run += " --cost-only" if args.cost_only else ""
    if not args.assemble:
        for name in [] if args.no_quality else args.collections.split(","):
            for variant in args.variants.split(",") if args.recost else ():
                recost(name, variant, args)
            if args.cost_only:
                kind = "train" if args.supervised and name == SUPERVISED else "adapt"
                for variant in args.variants.split(","):
                    cost_only(name, variant, args, kind)
                kept = load_record(record_path(name))
                shown = f" ({name}, {'supervised, ' if kind == 'train' else ''}cost only)"
                write_record(record_path(name), {**kept, "runs": [*kept["runs"], run + shown]})
                continue
            keep(name, collection_rows(name, args), run + f" ({name}{', supervised' if args.supervised else ''})")
        if args.memory:
            kept = load_record(record_path("memory"))
            runs = [*kept.get("runs", []), run + " --memory"]
            write_record(record_path("memory"), {"runs": runs, "targets": memory_rows(args)})
        if args.heap:
            kept = load_record(record_path("heap"))
            runs = [*kept.get("runs", []), run + " --heap"]
            write_record(record_path("heap"), {"runs": runs, "allocators": heap_rows(args)})
        if args.serving:
            setups = serving_rows(args)
            kept = load_record(record_path("serving"))
            write_record(
                record_path("serving"), {"runs": [*kept.get("runs", []), run + " --serving"], "setups": setups}
            )
    assemble(args, run)


if __name__ == "__main__":
    main()
