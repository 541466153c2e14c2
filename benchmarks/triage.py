"""Triage: "is this report already filed?" as a yes/no answer, on openoffice-dups split in time.

Pairs (``sbert.data.pairs_from_beir``): each report with its judged master as a duplicate, and the
best-ranked other master (what a search would show first, ranked by the default model) as a hard
non-duplicate. The cosine threshold with the best F1 is chosen on the OLDER 80% of reports and applied
unchanged to the NEWER 20% (what a tracker's triage would do with the reports it has); the newer part's own
best threshold is shown beside it, marked, as a bound. Models: the default model, and where earlier
benchmarks left them (benchmarks/.work), the model fine-tuned on the older reports' labels
(benchmarks/retrieval.py) and the default model adapted without labels (benchmarks/adapt.py).

    python benchmarks/triage.py [--negatives 1] [--data DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from common import WORK, environment_lines, markdown_table, write_between_markers, write_result
from finetune_retrieval import split_collection

import sbert
from sbert.data.beir import RetrievalCollection, read_beir
from sbert.data.pairs_from_beir import classification_pairs
from sbert.evaluation.pair_classification import average_precision, best_f1

DOC = Path(__file__).resolve().parent.parent / "docs" / "retrieval.md"
BEGIN, END = "<!-- benchmarks/triage.py: begin -->", "<!-- benchmarks/triage.py: end -->"
MODELS = {
    "default model": "default",
    "fine-tuned on older reports' labels": WORK / "retrieval" / "openoffice-dups-finetuned",
    "adapted without labels (title+crop)": WORK / "adapt" / "openoffice-dups" / "title+crop-150",
}


def dense_ranker(model, collection: RetrievalCollection):
    """Queries -> document ids best first by ``model``'s cosine (the hard non-duplicates)."""
    from sbert.search.exact import semantic_search

    ids = list(collection.corpus)
    documents = model.encode(list(collection.document_texts().values()), show_progress=False)

    def rank(queries):
        found = semantic_search(model.encode(list(queries), show_progress=False), documents, top_k=10)
        return [[ids[i] for i in row] for row in found.indices]

    return rank


def scores(model, pairs: list[tuple[str, str]]) -> np.ndarray:
    a = model.encode([p[0] for p in pairs], show_progress=False)
    b = model.encode([p[1] for p in pairs], show_progress=False)
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


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
    began = time.perf_counter()
    folder = split_collection("openoffice-dups", args.data)
    parts = {split: read_beir(folder, split) for split in ("train", "test")}
    ranker_model = sbert.load("default", device="cpu")
    pairs = {
        split: classification_pairs(c, seed=0, negatives_per_query=args.negatives, ranker=dense_ranker(ranker_model, c))
        for split, c in parts.items()
    }
    rows = []
    for label, path in MODELS.items():
        if path != "default" and not Path(path).is_dir():
            print(f"skipping {label}: {path} is missing (run the benchmark that makes it)")
            continue
        model = sbert.load(str(path), device="cpu")
        train_scores, test_scores = scores(model, pairs["train"][0]), scores(model, pairs["test"][0])
        _, _, _, threshold = best_f1(train_scores, pairs["train"][1])
        precision, recall, f1 = at_threshold(test_scores, pairs["test"][1], threshold)
        oracle = best_f1(test_scores, pairs["test"][1])
        ap = average_precision(test_scores, pairs["test"][1])
        rows.append([label, f"{threshold:.3f}", f"{100 * precision:.1f}", f"{100 * recall:.1f}", f"{100 * f1:.1f}",
                     f"{100 * oracle[0]:.1f} at {oracle[3]:.3f}", f"{100 * ap:.1f}"])  # fmt: skip
        print(rows[-1], flush=True)
    header = ["model", "threshold (chosen on older)", "precision", "recall", "F1",
              "newer part's own best F1 (bound)", "AP"]  # fmt: skip
    counts = {s: (sum(pairs[s][1]), len(pairs[s][1]) - sum(pairs[s][1])) for s in pairs}
    lines = [
        "# Triage: is this report a duplicate?",
        "",
        *markdown_table(header, rows),
        "",
        f"Pairs: older part {counts['train'][0]:,} duplicates / {counts['train'][1]:,} hard non-duplicates; newer "
        f"part {counts['test'][0]:,} / {counts['test'][1]:,}. Cosine similarity; precision, recall and F1 x 100 on "
        f"the newer part at the threshold chosen on the older part. Wall time {time.perf_counter() - began:.0f} s.",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers")),
    ]
    write_result(args.out, lines)
    write_between_markers(DOC, BEGIN, END, lines[2:])


if __name__ == "__main__":
    main()
