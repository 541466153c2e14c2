"""Which pseudo-queries should ``--auto`` choose on? Titles, spans, or a coin between them
(``sbert.search.auto.KINDS``), scored by how close each kind's choice comes to the best way of searching
chosen *with* the test labels, for several models on each collection.

For each collection and model: every way of searching (``sbert.search.auto.CHOICES``) scored on the test
queries (taken from benchmarks/adapt.py's record when it has them, else measured here), then
``choose_search`` once per kind, all inside one ``Encoder.reusing_vectors`` (the corpus is embedded once;
only each kind's held-out documents are new). Models: ``default`` (the default model) or an adapt method
whose model benchmarks/adapt.py left in ``.work/adapt/<collection>/<method>-100`` (this script adapts it
the same way when it is missing). Rows are kept in ``benchmarks/results/records/auto_kinds.json``
(a re-measured row replaces itself); the table goes to ``benchmarks/results/auto_kinds.md`` and
between markers in results/retrieval-evidence.md. The default kind is chosen on one collection and
reported on the other: the table says which.

    python -m benchmarks.auto_kinds --collections scifact --models default,title,crop,ict,simcse
"""

from __future__ import annotations

import argparse
import time

import torch

import sbert
from benchmarks.adapt import KL_TEMPERATURE, TEACHER, adapted, every_choice
from benchmarks.adapt import read_record as adapt_rows
from benchmarks.lib import (
    RECORDS,
    RESULTS,
    command_line,
    cpu_name,
    environment_lines,
    load_record,
    markdown_table,
    write_between_markers,
    write_record,
    write_result,
)
from benchmarks.lib.retrieval_data import test_part
from sbert.data.paths import data_dir
from sbert.search.auto import (
    CHOICES,
    KEEP_DEFAULT_WITHIN,
    KIND,
    KINDS,
    Margin,
    choose_search,
    default_choice,
    reusing_vectors,
)

RECORD = RECORDS / "auto_kinds.json"
DOC = RESULTS / "retrieval-evidence.md"
BEGIN, END = "<!-- auto-kinds:begin -->", "<!-- auto-kinds:end -->"
HEADLINE = {"scifact": "ndcg@10", "openoffice-dups": "mrr@10"}
CHOSEN_ON = "scifact"  # the collection KIND was chosen on; the other one reports it
DEFAULT = default_choice(CHOICES)  # what --auto keeps unless the best is ahead of it beyond its rule


def label_of(model: str) -> str:
    """benchmarks/adapt.py's row label for ``model``."""
    return "default model" if model == "default" else f"adapt --method {model}"


def test_scores(name: str, model: str, encoder, collection) -> dict[str, float]:
    """Each way of searching's headline metric on the test queries: adapt.py's record, or measured."""
    metric, label = HEADLINE[name], label_of(model)
    for row in adapt_rows(name)[0]:
        if row.name == f"{label}, dense" and row.choices:
            return {choice: scores[metric] for choice, scores in row.choices.items()}
    began = time.perf_counter()
    scores = every_choice(encoder, collection)
    print(f"  every way of searching on the test queries: {time.perf_counter() - began:.0f} s", flush=True)
    return {choice: values[metric] for choice, values in scores.items()}


def measure(name: str, model: str, kinds: list[str], args) -> dict:
    """One model's row: the labelled best, and each kind's choice with its test score and evidence."""
    folder = "default" if model == "default" else str(adapted(name, model, args)[0])
    encoder = sbert.load(folder, device="cpu")
    collection = test_part(name, args)  # read once: its corpus is what --auto draws from, too
    corpus = list(collection.corpus.values())
    with reusing_vectors(encoder):
        test = test_scores(name, model, encoder, collection)
        best = max(test, key=lambda c: test[c])
        out = {}
        for kind in kinds:
            began = time.perf_counter()
            result = choose_search(encoder, corpus, model=label_of(model), kind=kind, show_progress=False)
            pick, top = result.choice.name, (result.best or result.choice).name
            out[kind] = {
                "pick": pick,
                "test": test[pick],
                "gap": test[best] - test[pick],
                "best": top,  # the best on the pseudo-queries: the pick unless the default stayed
                "best_test": test[top],
                "default_test": test[DEFAULT.name],
                "over_default": result.over_default.record() if result.over_default else None,
                "stayed_with_default": result.stayed_with_default,
                "evidence": result.scores,
                "kinds": result.kinds,
                "runner_up": result.margin.record() if result.margin else None,
                "seconds": round(time.perf_counter() - began, 1),
            }
            print(f"  {kind}: chose {pick}, {test[pick]:.2f} on the test queries (best {best} {test[best]:.2f})")
    command = command_line()
    return {"best": best, "best_score": test[best], "metric": HEADLINE[name], "kinds": out, "cpu": cpu_name(),
            "run": f"`{command}`"}  # fmt: skip


def read_record() -> dict:
    """The rows measured so far: collection -> model label -> row."""
    return load_record(RECORD)


def table_lines(record: dict) -> list[str]:
    """The table (one row a collection and model, one column a kind) and the mean gap by kind."""
    kinds = list(KINDS)
    rows, means = [], []
    for name, models in record.items():
        for label, row in models.items():
            cells = []
            for kind in kinds:
                found = row["kinds"].get(kind)
                top, score = (
                    (found.get("best", found["pick"]), found.get("best_test", found["test"])) if found else (0, 0)
                )
                cells.append(f"{top}: {score:.2f} (gap {row['best_score'] - score:.2f})" if found else "-")
            rows.append([f"{name}, {label}", f"{row['best']}: {row['best_score']:.2f}", *cells])
        for kind in kinds:
            gaps = [
                row["best_score"] - row["kinds"][kind].get("best_test", row["kinds"][kind]["test"])
                for row in models.values()
                if kind in row["kinds"]
            ]
            if gaps:
                means.append(f"{name}: `{kind}` mean gap {sum(gaps) / len(gaps):.2f}, worst {max(gaps):.2f}")
    header = ["collection (metric), model", "best with the test labels", *(f"`{kind}` chose" for kind in kinds)]
    note = (
        f"Each cell: the best way of searching on 200 pseudo-queries of that kind, its score on the "
        f"test queries (NDCG@10 on SciFact, MRR@10 on openoffice-dups' newest 20%), and its gap to the best "
        f"chosen with the test labels. The default kind (`{KIND}`) was chosen on {CHOSEN_ON}'s test queries; "
        f"the other collection's rows are the evidence that counts (docs/search.md weighs both)."
    )
    notes = sorted(
        {f"{name}: {row['run']}" for name, models in record.items() for row in models.values() if "run" in row}
    )
    return [note, "", *markdown_table(header, rows), "", *(f"- {line}" for line in means + notes)]


def guarded(row: dict, kind: str) -> dict | None:
    """``kind``'s choice under the rule ``--auto`` follows now (the default stays unless the best on the
    pseudo-queries is ahead of it by more than ``KEEP_DEFAULT_WITHIN`` standard errors): as measured, or,
    for a row measured before the rule, derived where its record holds the margin over the default (the
    best was the default, or the default was the runner-up) and the default's test score; else None."""
    found = row["kinds"].get(kind)
    if found is None or "stayed_with_default" in found:
        return found
    if found["pick"] == DEFAULT.name:
        return {**found, "best": found["pick"], "best_test": found["test"], "over_default": None, "derived": True}
    margin = found.get("runner_up") or {}
    default_test = row["best_score"] if row["best"] == DEFAULT.name else found.get("default_test")
    for other in row["kinds"].values():  # another kind's choice may have been the default
        default_test = other["test"] if other["pick"] == DEFAULT.name else default_test
    if default_test is None:
        return None
    derived = {"best": found["pick"], "best_test": found["test"], "derived": True}
    if margin.get("name") != DEFAULT.name:  # the margin is unknown: either outcome, the worse gap counts
        test = min(found["test"], default_test)
        pick, extra = f"{found['pick']} or {DEFAULT.name}", {"over_default": None, "either": True}
    else:  # the library's own rule on the recorded margin
        stays = not Margin(margin["name"], margin["gap"], margin["standard_error"]).ahead_by_more_than(
            KEEP_DEFAULT_WITHIN
        )
        pick, test = (DEFAULT.name, default_test) if stays else (found["pick"], found["test"])
        extra = {"over_default": margin, "stayed_with_default": stays}
    return {"pick": pick, "test": test, "gap": row["best_score"] - test, **derived, **extra}


def rule_lines(record: dict) -> list[str]:
    """The default kind's choices under the rule that keeps the default within one standard error."""
    rows, gaps = [], {}
    for name, models in record.items():
        for label, row in models.items():
            found = guarded(row, KIND)
            if found is None:
                rows.append([f"{name}, {label}", f"{row['best']}: {row['best_score']:.2f}", "-", "-", "-"])
                continue
            over = found["over_default"]
            lead = f"{over['gap']:.2f} ({over['standard_error']:.2f})" if over else "(it is the default)"
            lead = "not recorded (either choice is shown; the worse counts)" if found.get("either") else lead
            rows.append([
                f"{name}, {label}" + (" (derived from the record)" if found.get("derived") else ""),
                f"{row['best']}: {row['best_score']:.2f}",
                f"{found['best']}: {found['best_test']:.2f} (gap {row['best_score'] - found['best_test']:.2f})",
                lead,
                f"**{found['pick']}: {found['test']:.2f} (gap {found['gap']:.2f})**",
            ])  # fmt: skip
            gaps.setdefault((name, bool(found.get("either"))), []).append(found["gap"])
    header = ["collection, model", "best with the test labels", f"best on the `{KIND}` pseudo-queries",
              f"its lead over {DEFAULT.name} on them (standard error)", "`--auto` chooses"]  # fmt: skip
    note = (
        f"`--auto` keeps the default way of searching ({DEFAULT.name}, what a user who passes no option gets) "
        f"unless the best on the pseudo-queries is ahead of it by more than {KEEP_DEFAULT_WITHIN:g} standard "
        "error of the per-query differences. Rows measured before that rule are derived from their record "
        "where it holds the margin over the default (the default was the best or the runner-up) or where "
        "the default's test score is known from another kind's choice (both outcomes shown, the worse "
        "counted); '-' where neither."
    )
    means = [
        f"{name}: "
        + ("the rule's choice not known (the worse of the two)" if either else "the rule's choice known")
        + f": mean gap {sum(g) / len(g):.2f}, worst {max(g):.2f} ({len(g)} models)"
        for (name, either), g in gaps.items()
    ]
    return [note, "", *markdown_table(header, rows), "", *(f"- {line}" for line in means)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", default="scifact,openoffice-dups")
    parser.add_argument("--models", default="default,title,crop")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--data", default=str(data_dir()))
    parser.add_argument("--assemble", action="store_true", help="only rebuild the tables from the record")
    args = parser.parse_args()
    args.queries = args.documents = None
    args.steps, args.seed, args.hold_out, args.device = 100, 42, 0, "cpu"  # as benchmarks/adapt.py adapts
    args.teacher, args.temperature = TEACHER, KL_TEMPERATURE
    if not args.assemble:
        for name in args.collections.split(","):
            for model in args.models.split(","):
                print(f"{name}, {label_of(model)}", flush=True)
                row = measure(name, model, args.kinds.split(","), args)
                record = read_record()  # as it is now: another run may have added to it meanwhile
                record.setdefault(name, {})[label_of(model)] = row
                write_record(RECORD, record)  # a killed run keeps the models measured so far
    lines = [*table_lines(read_record()), "", *rule_lines(read_record())]
    write_between_markers(DOC, BEGIN, END, lines)
    write_result("auto_kinds.md", ["# --auto: which pseudo-queries", "", *environment_lines(
        torch.get_num_threads(), ("torch", "transformers", "sbert")), "", *lines])  # fmt: skip


if __name__ == "__main__":
    main()
