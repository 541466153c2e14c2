"""What GISTEmbed's guided masking drops on openoffice-dups' training batches, checked against the labels.

No training: the training part of openoffice-dups (its older 80% of queries, with the negatives mined by
the default model as benchmarks/finetune_retrieval.py mines them) is cut into the batches the trainer
cuts (``sbert.training.sampling.epoch_batches``: batch 32, seed 42, both epochs), and the guide
(all-mpnet-base-v2, ``sbert.losses.in_batch.Guide``, the code ``--guide`` trains with) says, at each
margin, which in-batch candidates it would drop from each row's softmax. Each dropped candidate is
looked up in the training judgments: a candidate judged relevant to the row's query (a duplicate the
batch holds twice) is one masking should drop; any other is a negative by the labels. The test queries
are not read. It also counts what the no-duplicates sampler keeps out: a row's own positive sitting in
the batch as another row's candidate (plain batches) and other judged duplicates of the row's query.

Why: with GISTEmbed's margin (0) the guide lowered openoffice-dups' fine-tuned MRR@10 (benchmarks/batches.py);
this says what it dropped. Cost on 2 CPU cores: mining ~1.5 min, then the guide embeds each text once
(~2 texts/s at 384 tokens: ~45 min for both epochs' ~5,000 texts); ``--batches N`` stops after N
batches an epoch.

    python -m benchmarks.guide_masking [--margins 0.05,0,-0.05,-0.1,-0.2] [--batches N] [--guide all-mpnet-base-v2]
    python -m benchmarks.guide_masking --quick   # 2 batches of epoch 1, printed (no docs)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

from benchmarks.finetune_retrieval import mined_examples, training
from benchmarks.lib import RESULTS, environment_lines, markdown_table, write_between_markers, write_result
from benchmarks.lib.retrieval_data import split_collection

DOC = RESULTS / "retrieval-evidence.md"
BEGIN, END = "<!-- benchmarks/guide_masking.py: begin -->", "<!-- benchmarks/guide_masking.py: end -->"
NAME = "openoffice-dups"


def judged(data: str | None) -> dict[str, set[str]]:
    """Each training query's text -> the texts of the documents judged relevant to it."""
    from sbert.data.beir import read_beir

    train = read_beir(split_collection(NAME, data), "train")
    docs = train.document_texts()
    relevant: dict[str, set[str]] = {}
    for qid, grades in train.qrels.items():
        found = {docs[d] for d, grade in grades.items() if grade > 0 and d in docs}
        relevant.setdefault(train.queries[qid], set()).update(found)
    return relevant


def sampler_counts(examples: list, relevant: dict[str, set[str]], epochs: int, args) -> dict[str, dict[str, int]]:
    """Per batching (plain, sampler): candidates that are a row's own positive, and other judged duplicates
    of its query, over ``epochs`` epochs' batches."""
    from sbert.losses.in_batch import text_columns
    from sbert.training.sampling import epoch_batches

    found = {}
    for kind in ("plain", "sampler"):
        counts = {"own positive": 0, "other judged": 0}
        for epoch in range(epochs):
            cut = epoch_batches(examples, args.batch_size, (args.seed, epoch, 0), no_duplicates=kind == "sampler")
            for rows in cut.batches:
                anchors, positives, *rest = text_columns([examples[r] for r in rows])
                candidates = positives + [t for column in rest for t in column]
                for i, anchor in enumerate(anchors):
                    others = candidates[:i] + candidates[i + 1 :]  # every candidate but the row's own positive
                    counts["own positive"] += others.count(positives[i])
                    counts["other judged"] += sum(t in relevant.get(anchor, ()) and t != positives[i] for t in others)
        found[kind] = counts
    return found


def masking(examples: list, relevant: dict[str, set[str]], epochs: int, args) -> tuple[dict, dict]:
    """Per margin: what the guide drops from the sampler's batches (counts, scores, judged relevant or not);
    and the guide's score of each row's own positive."""
    import torch

    from sbert.losses.in_batch import Guide, text_columns
    from sbert.losses.teachers import Teacher
    from sbert.training.sampling import epoch_batches

    teacher, cpu = Teacher(args.guide), torch.device("cpu")
    guides = {m: Guide(teacher, args.margin_strategy, m) for m in args.margins}
    stats = {m: {"relevant": 0, "scores": [], "positive_where_dropped": []} for m in guides}
    positives_score: list[float] = []
    for epoch in range(epochs):
        cut = epoch_batches(examples, args.batch_size, (args.seed, epoch, 0), no_duplicates=True)
        for number, rows in enumerate(cut.batches[: args.batches]):
            columns = text_columns([examples[r] for r in rows])
            anchors, candidates = columns[0], [t for column in columns[1:] for t in column]
            sims = teacher.similarity_matrix(anchors, candidates, cpu)
            n = len(anchors)
            positives_score += sims[range(n), range(n)].tolist()
            for margin, guide in guides.items():
                dropped, s = guide.mask(columns, cpu), stats[margin]  # guide.counts: what it dropped
                for i, j in dropped.nonzero().tolist():
                    s["relevant"] += candidates[j] in relevant.get(anchors[i], ())
                    s["scores"].append(float(sims[i, j]))
                    s["positive_where_dropped"].append(float(sims[i, i]))
            print(f"epoch {epoch + 1}, batch {number + 1}: {n} rows", flush=True)
    for margin, guide in guides.items():
        stats[margin].update(dataclasses.asdict(guide.counts))
    return stats, {"positive": positives_score}


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def lines_for(stats: dict, scores: dict, counts: dict, examples: int, epochs: int, args, cost: str) -> list[str]:
    header = ["margin", "dropped per row", "share of candidates dropped", "rows with a drop"]
    header += ["dropped, judged relevant", "guide score of dropped (median)", "guide score of their positive (median)"]
    body = []
    for margin, s in stats.items():
        body.append([f"{margin:g}", f"{s['dropped'] / s['rows']:.2f}", f"{100 * s['dropped'] / s['candidates']:.2f}%"])
        body[-1] += [f"{100 * s['rows_dropped'] / s['rows']:.0f}%", f"{s['relevant']:,} of {s['dropped']:,}"]
        body[-1] += [median(s["scores"]), median(s["positive_where_dropped"])]
    positive = scores["positive"]
    first = next(iter(stats.values()))
    cut = "every batch" if args.batches is None else f"the first {args.batches} batches an epoch"
    span = f"{epochs} epoch{'s' if epochs > 1 else ''}"
    return [
        f"openoffice-dups' training part ({examples:,} rows: query, judged duplicate, one mined negative; the test "
        f"queries are not read), cut as the trainer cuts it (no-duplicates sampler, batch {args.batch_size}, seed "
        f"{args.seed}, {span}; {cut}: {first['rows']:,} rows scored). Guide: {args.guide}, margin strategy "
        f"{args.margin_strategy} (a candidate is dropped where the guide scores it above the positive's score minus "
        f"the margin; 0 is GISTEmbed's). 'judged relevant': the dropped candidate is judged a duplicate of the row's "
        f"query in the training judgments. {cost}",
        "",
        *markdown_table(header, body),
        "",
        f"- the guide's score of a row's own judged duplicate: median {median(positive)}, 10th percentile "
        f"{statistics.quantiles(positive, n=10)[0]:.2f} ({len(positive):,} rows)",
        f"- what the sampler keeps apart, over every batch of {span}: a row's own duplicate as another "
        f"row's candidate {counts['plain']['own positive']:,} times in plain batches, "
        f"{counts['sampler']['own positive']:,} with the sampler; another judged duplicate of the row's query "
        f"{counts['plain']['other judged']:,} and {counts['sampler']['other judged']:,} times",
        "",
        *environment_lines(__import__("torch").get_num_threads(), ("sbert", "torch", "transformers")),
    ]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--margins", default="0.05,0,-0.05,-0.1,-0.2", help="the guide's margins, comma-separated")
    parser.add_argument("--margin-strategy", default="absolute", choices=("absolute", "relative"))
    parser.add_argument("--guide", default="all-mpnet-base-v2")
    parser.add_argument("--batches", type=int, default=None, help="at most this many batches an epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--data", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    try:
        args.margins = [float(m) for m in args.margins.split(",")]
    except ValueError:
        parser.error(f"--margins: expected numbers separated by commas, got {args.margins!r}")
    if args.quick:
        args.batches = 2
    return args


def main() -> None:
    args = arguments()
    began, load = time.perf_counter(), os.getloadavg()[0]
    examples = mined_examples(NAME, args.data)
    relevant = judged(args.data)
    epochs = 1 if args.quick else training(NAME)["epochs"]
    counts = sampler_counts(examples, relevant, epochs, args)
    stats, scores = masking(examples, relevant, epochs, args)
    seconds = time.perf_counter() - began
    cost = f"Wall time {seconds:.0f} s (load average {load:.2f} before, {os.getloadavg()[0]:.2f} after)."
    lines = lines_for(stats, scores, counts, len(examples), epochs, args, cost)
    if args.quick:
        print("\n".join(lines))
        return
    write_result("guide_masking.md", ["# What guided masking drops on openoffice-dups", "", *lines])
    write_between_markers(DOC, BEGIN, END, lines)


if __name__ == "__main__":
    main()
