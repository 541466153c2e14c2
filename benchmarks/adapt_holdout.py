"""``--auto`` after ``sbert adapt``: the way of searching chosen on pseudo-queries the model trained on
(``--hold-out 0``, adapt's default until it held them out) against pseudo-queries it never saw (the default:
the documents ``--auto`` draws are left out of training, their ids kept in the model's ``adapt.json``, and
``--auto`` with that model draws from exactly those).

For each collection (SciFact; openoffice-dups split in time, as benchmarks/adapt.py reads them), the default
model is adapted by the default method (title, seed 42, 100 steps at batch 32: ``sbert adapt`` run by
benchmarks/adapt.py's ``adapted``, cached where it caches) both ways. Each model chooses with ``--auto`` as a
user gets it (200 mixed pseudo-queries, the default way of searching kept unless the best leads it by more
than a standard error) and as benchmarks/adapt.py's rows choose (titles alone, the best taken). The held-out
model's draw takes the documents its adapt.json names, which are the documents, and the pseudo-queries, the
other model's draw takes: the one difference is whether the model trained on them. Every way of searching is
scored on the test queries (``adapt.every_choice``), so each choice's test score is read off beside the best.

    python -m benchmarks.adapt_holdout [--collections scifact,openoffice-dups] [--device cpu]
    python -m benchmarks.adapt_holdout --assemble   # run nothing: the table from the records kept
"""

from __future__ import annotations

import argparse
import os
import time
from copy import copy

import torch

import sbert
from benchmarks.adapt import COLLECTIONS, HEADLINE, adapt_key, adapted, every_choice, machine
from benchmarks.lib import RECORDS, environment_lines, load_record, markdown_table, write_record, write_result
from benchmarks.lib.retrieval_data import test_part
from sbert.adapt.methods import DEFAULT_METHOD
from sbert.search.auto import QUERIES, choose_search, reusing_vectors

# (label, --hold-out: None is sbert adapt's default)
MODELS = (("--hold-out 0 (trained on every document)", 0), ("default hold-out (recorded in adapt.json)", None))
# (label, kind, keep the default within a standard error): --auto as a user gets it, and as adapt.py's rows chose
DRAWS = (("--auto (mixed, default kept)", "mixed", True), ("titles, best taken (adapt.py's rows)", "title", False))


def record_path(name: str):
    return RECORDS / "adapt_holdout" / f"{name}.json"


def measure(name: str, args) -> dict:
    """Both models' choices on ``name`` and every way of searching's test metrics for each."""
    collection = test_part(name, args)
    documents = list(collection.corpus.values())
    print(f"{name}: {len(collection.queries)} test queries, {len(documents)} documents", flush=True)
    models = []
    for label, hold_out in MODELS:
        one = copy(args)
        one.seed, one.hold_out, one.steps, one.guide = 42, hold_out, 100, None
        folder, cost = adapted(name, DEFAULT_METHOD, one)
        model = sbert.load(str(folder), device=args.device)
        draws = {}
        with reusing_vectors(model):  # the corpus is embedded once for the draws and the test indexes
            for draw, kind, keep in DRAWS:
                began = time.perf_counter()
                auto = choose_search(model, documents, model=label, kind=kind, keep_default=keep, show_progress=False)
                print(f"  {label}, {draw}: {auto.summary()} [{time.perf_counter() - began:.0f} s]", flush=True)
                draws[draw] = {"record": auto.record(), "summary": auto.summary()}
            print(f"  {label}: every way of searching, on the test queries", flush=True)
            scores = every_choice(model, collection)
        models.append({"label": label, "key": adapt_key(DEFAULT_METHOD, one), "adapt": cost, "draws": draws})
        models[-1]["test"] = scores
    run = f"{time.strftime('%Y-%m-%d')}, {machine(args)}, load {os.getloadavg()[0]:.2f} at the end"
    command = f"python -m benchmarks.adapt_holdout --collections {args.collections} --device {args.device}"
    return {"collection": name, "method": DEFAULT_METHOD, "run": run, "command": command, "models": models}


def lines_of(records: list[dict], ran: str) -> list[str]:
    header = [
        "collection",
        "adapted with",
        "pseudo-queries, rule",
        "--auto chose",
        "its NDCG@10 on them",
        "dense on them",
        "test: the choice",
        "test: dense",
        "test: best with labels",
    ]
    body = []
    for kept in records:
        name, metric = kept["collection"], HEADLINE[kept["collection"]]
        for model in kept["models"]:
            test = model["test"]
            best = max(test, key=lambda c: test[c][metric])
            for draw, auto in model["draws"].items():
                chose, pseudo = auto["record"]["choice"]["name"], auto["record"]["ndcg@10"]
                body.append(
                    [
                        name,
                        model["label"],
                        f"{draw}: {auto['record']['pseudo_queries']}",
                        chose,
                        f"{pseudo[chose]:.2f}",
                        f"{pseudo['dense']:.2f}",
                        f"{metric} {test[chose][metric]:.2f}",
                        f"{test['dense'][metric]:.2f}",
                        f"{test[best][metric]:.2f} ({best})",
                    ]
                )
    lines = ["# --auto after sbert adapt: pseudo-queries the model trained on, and ones it never saw", ""]
    lines += [*markdown_table(header, body), ""]
    lines += ["Side by side (the first model trained on the pseudo-queries' documents, the second did not):", ""]
    lines += [*side_by_side(records), ""]
    lines += [
        f"Each collection's default model adapted by `sbert adapt default --corpus <collection> --method "
        f"{DEFAULT_METHOD} --steps 100 --seed 42` twice: with `--hold-out 0` (every document trained on) and "
        f"without `--hold-out` (the default: the {QUERIES} documents `--auto` draws left out of training and "
        "named in the model's adapt.json, which `--auto` then draws from). The two models' draws are the same "
        "documents and the same pseudo-queries. 'on them': NDCG@10 on those pseudo-queries; 'test': the "
        "collection's test queries (SciFact NDCG@10, openoffice-dups MRR@10, the newest 20% of reports), each "
        "choice scored as benchmarks/adapt.py scores it; 'best with labels' is the ceiling, chosen on the test "
        "queries themselves.",
        "",
        "What --auto printed:",
        "",
    ]
    for kept in records:
        for model in kept["models"]:
            for draw, auto in model["draws"].items():
                lines.append(f"- {kept['collection']}, {model['label']}, {draw}: `{auto['summary']}`")
    lines += ["", "Runs and adapt cost:", ""]
    for kept in records:
        costs = "; ".join(
            f"{m['label']}: adapt {m['adapt'].get('seconds', 0):.0f} s, peak {m['adapt'].get('peak_rss_gib', 0)} GiB, "
            f"load {m['adapt'].get('load_before')}/{m['adapt'].get('load_after')}"
            for m in kept["models"]
        )
        command = f", `{kept['command']}`" if kept.get("command") else ""
        lines.append(f"- {kept['collection']} ({kept['run']}{command}): {costs}")
    lines += [
        "",
        f"Command: {ran}.",
        "",
        "This invocation's machine and versions:",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers", "bm25s")),
    ]
    return lines


def side_by_side(records: list[dict]) -> list[str]:
    """For each collection and draw: what each model's --auto chose, its test score, and how much higher the
    pseudo-queries score the model that trained on them (dense, and the choice)."""
    lines = []
    for kept in records:
        name, metric = kept["collection"], HEADLINE[kept["collection"]]
        if len(kept["models"]) != 2:
            continue
        leaky, clean = kept["models"]
        for draw in leaky["draws"]:
            a, b = leaky["draws"][draw]["record"], clean["draws"][draw]["record"]
            chose_a, chose_b = a["choice"]["name"], b["choice"]["name"]
            same = "the same choice" if chose_a == chose_b else "different choices"
            lines.append(
                f"- {name}, {draw}: {same}: with the leak `{chose_a}` (test {metric} "
                f"{leaky['test'][chose_a][metric]:.2f}), without `{chose_b}` ({clean['test'][chose_b][metric]:.2f}); "
                f"on the pseudo-queries, dense {a['ndcg@10']['dense']:.2f} against {b['ndcg@10']['dense']:.2f}, "
                f"the choice {a['ndcg@10'][chose_a]:.2f} against {b['ndcg@10'][chose_b]:.2f}; test dense "
                f"{leaky['test']['dense'][metric]:.2f} against {clean['test']['dense'][metric]:.2f}"
            )
    return lines


def main() -> None:

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--data", default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--assemble", action="store_true", help="run nothing: the table from the records kept")
    args = parser.parse_args()
    args.teacher, args.temperature, args.guide_margin = None, 1.0, 0.0  # what adapt.py's adapted reads
    began = time.perf_counter()
    for name in [] if args.assemble else args.collections.split(","):
        write_record(record_path(name), measure(name, args))
    records = [load_record(record_path(n)) for n in COLLECTIONS if record_path(n).is_file()]
    ran = (
        "assembled from the records kept (nothing run; each names the command that measured it, above)"
        if args.assemble
        else f"`python -m benchmarks.adapt_holdout --collections {args.collections} --device {args.device}`, "
        f"{time.perf_counter() - began:.0f} s"
    )
    write_result("adapt_holdout.md", lines_of(records, ran))


if __name__ == "__main__":
    main()
