"""Triage: "is this report already filed?" as a yes/no answer, on openoffice-dups split in time.

What ``sbert eval --triage`` does (``sbert.evaluation.triage.TriageEvaluator``): each report is paired with
its judged master (a duplicate) and with the best-ranked other master (a hard non-duplicate: what the
model's own search shows first, ranked through the index code), every pair scored as ``sbert search`` scores
a hit (``encode_query`` against ``encode_document``, cosine). The threshold with the best F1 is chosen on the
OLDER 80% of reports and applied unchanged to the NEWER 20% (what a tracker's triage would do with the
reports it has); the newer part's own best threshold is shown beside it, marked, as a bound. Models: the
default model, and where they are on disk (benchmarks/.work; this script trains none), the default model
adapted without labels by ``sbert adapt``'s default method (``benchmarks/adapt.py --methods title``, or
``sbert adapt default --corpus .../openoffice-dups --out benchmarks/.work/adapt/openoffice-dups/title-100``),
adapted with the teacher (``distill-margin``), and fine-tuned on the older reports' labels
(benchmarks/retrieval.py).

    python benchmarks/triage.py [--negatives 1] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
from common import WORK, environment_lines, markdown_table, write_between_markers, write_result
from finetune_retrieval import split_collection

import sbert
from sbert.data.beir import read_beir
from sbert.evaluation.pair_classification import average_precision, best_f1
from sbert.evaluation.triage import TriageEvaluator

DOC = Path(__file__).resolve().parent.parent / "docs" / "retrieval.md"
BEGIN, END = "<!-- benchmarks/triage.py: begin -->", "<!-- benchmarks/triage.py: end -->"
ADAPTED = WORK / "adapt" / "openoffice-dups"
MODELS = {
    "default model": "default",
    "adapted without labels (sbert adapt's default: title, 100 steps)": ADAPTED / "title-100",
    "adapted with a teacher (distill-margin, all-mpnet-base-v2, 100 steps)": ADAPTED
    / "distill-margin-100-all-mpnet-base-v2",
    "fine-tuned on older reports' labels": WORK / "retrieval" / "openoffice-dups-finetuned",
}


def at_threshold(values: np.ndarray, labels: list[int], threshold: float) -> tuple[float, float, float]:
    """(precision, recall, F1) of answering "duplicate" at or above ``threshold``."""
    said = values >= threshold
    truth = np.asarray(labels) == 1
    hits = int((said & truth).sum())
    precision = hits / max(int(said.sum()), 1)
    recall = hits / max(int(truth.sum()), 1)
    return precision, recall, 2 * precision * recall / max(precision + recall, 1e-12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--negatives", type=int, default=1, help="hard non-duplicates per report")
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default="triage.md")
    args = parser.parse_args()
    began, load_before = time.perf_counter(), os.getloadavg()[0]
    folder = split_collection("openoffice-dups", args.data)
    parts = {split: read_beir(folder, split) for split in ("train", "test")}
    judged = {split: TriageEvaluator(c, negatives=args.negatives) for split, c in parts.items()}
    counts = {}
    rows = []
    for label, path in MODELS.items():
        if path != "default" and not Path(path).is_dir():
            print(f"skipping {label}: {path} is missing (run the benchmark that makes it)")
            continue
        model = sbert.load(str(path), device="cpu")
        (train_scores, train_labels), (test_scores, test_labels) = (judged[s].scored_pairs(model) for s in parts)
        counts[label] = {"train": train_labels, "test": test_labels}
        _, _, _, threshold = best_f1(train_scores, train_labels)
        precision, recall, f1 = at_threshold(test_scores, test_labels, threshold)
        oracle = best_f1(test_scores, test_labels)
        ap = average_precision(test_scores, test_labels)
        rows.append([label, f"{threshold:.3f}", f"{100 * precision:.1f}", f"{100 * recall:.1f}", f"{100 * f1:.1f}",
                     f"{100 * oracle[0]:.1f} at {oracle[3]:.3f}", f"{100 * ap:.1f}"])  # fmt: skip
        print(rows[-1], flush=True)
    header = ["model", "threshold (chosen on older)", "precision", "recall", "F1",
              "newer part's own best F1 (bound)", "AP"]  # fmt: skip
    first = next(iter(counts.values()))
    counts = {s: (sum(first[s]), len(first[s]) - sum(first[s])) for s in ("train", "test")}
    lines = [
        "# Triage: is this report a duplicate?",
        "",
        *markdown_table(header, rows),
        "",
        f"Pairs: older part {counts['train'][0]:,} duplicates / {counts['train'][1]:,} hard non-duplicates; newer "
        f"part {counts['test'][0]:,} / {counts['test'][1]:,}; each model's pairs hold its own search's hardest "
        "non-duplicate (as `sbert eval --triage`). Cosine similarity, queries and documents scored as `sbert search` "
        "scores them; precision, recall and F1 x 100 on the newer part at the threshold chosen on the older part. "
        f"Wall time {time.perf_counter() - began:.0f} s; load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after.",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers")),
    ]
    write_result(args.out, lines)
    write_between_markers(DOC, BEGIN, END, lines[2:])


if __name__ == "__main__":
    main()
