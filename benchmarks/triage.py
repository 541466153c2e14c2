"""Triage: "is this report already filed?" as a yes/no answer, on openoffice-dups split in time.

What ``sbert eval --triage`` does (``sbert.evaluation.triage.TriageEvaluator``), with two answers.

**Pairs (``sbert search --threshold``, a cosine).** Each report is paired with its judged master (a
duplicate) and with the best-ranked other master (a hard non-duplicate: what the model's own search shows
first, ranked through the index code), every pair scored as ``sbert search`` scores a hit (``encode_query``
against ``encode_document``, cosine).

**Top hits (``sbert search --lead``).** Whether each report's top hit is its master, told by a signal of
its own hits. Five signals were candidates; the one sbert ships (the top hit's cosine minus the mean of hits
2-10's: ``sbert.search.retrieve.lead``) was chosen by its best F1 on the OLDER reports of openoffice-dups,
before any newer report was looked at; the table of that choice is printed first. The chosen signal is then
reported on the NEWER reports and, as a collection the choice never saw, on SciFact ("is the top abstract
a supporting one?": thresholds from its train queries, figures on its test queries).

Every threshold is chosen (best F1) on the older 80% of reports (SciFact: train queries) and applied
unchanged to the newer 20% (what a tracker's triage would do with the reports it has); the newer part's own
best threshold is shown beside it for the pairs, marked, as a bound. Models: the default model, and where
they are on disk (benchmarks/.work; this script trains none), the default model adapted without labels by
``sbert adapt``'s default method (``python -m benchmarks.adapt --methods title``, or ``sbert adapt default --corpus
.../openoffice-dups --out benchmarks/.work/adapt/openoffice-dups/title-100``), adapted with the teacher
(``distill-margin``), and fine-tuned on the older reports' labels (benchmarks/retrieval.py).

    python -m benchmarks.triage [--negatives 1] [--data DIR] [--no-scifact]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

import sbert
from benchmarks.lib import RESULTS, WORK, environment_lines, markdown_table, write_between_markers, write_result
from benchmarks.lib.retrieval_data import split_collection
from sbert.data.beir import RetrievalCollection, read_beir
from sbert.data.beir_labelled_pairs import drawn_queries
from sbert.evaluation.pair_classification import average_precision, best_f1
from sbert.evaluation.retrievers import IndexRetriever, RetrievalSettings
from sbert.evaluation.triage import TriageEvaluator, TriageScores
from sbert.search.retrieve import LEAD_HITS, lead

DOC = RESULTS / "retrieval-evidence.md"
BEGIN, END = "<!-- benchmarks/triage.py: begin -->", "<!-- benchmarks/triage.py: end -->"
ADAPTED = WORK / "adapt" / "openoffice-dups"
MODELS = {
    "default model": "default",
    "adapted without labels (sbert adapt's default: title, 100 steps)": ADAPTED / "title-100",
    "adapted with a teacher (distill-margin, all-mpnet-base-v2, 100 steps)": ADAPTED
    / "distill-margin-100-all-mpnet-base-v2",
    "fine-tuned on older reports' labels": WORK / "retrieval" / "openoffice-dups-finetuned",
}
CHOSEN = "lead over hits 2-10's mean (sbert search --lead)"
SIGNALS = {  # a report's hit scores, best first (10 at most) -> how sure its top hit is the duplicate
    "cosine of the top hit": lambda s: s[0],
    "lead over the 2nd hit": lambda s: s[0] - s[1],
    CHOSEN: lead,
    "lead over the 10th hit": lambda s: s[0] - s[-1],
    "z of the top hit among hits 1-10": lambda s: (s[0] - np.mean(s)) / max(float(np.std(s)), 1e-12),
}


def at_threshold(values: np.ndarray, labels: list[int], threshold: float) -> tuple[float, float, float]:
    """(precision, recall, F1) of answering "duplicate" at or above ``threshold``."""
    said = values >= threshold
    truth = np.asarray(labels) == 1
    hits = int((said & truth).sum())
    precision = hits / max(int(said.sum()), 1)
    recall = hits / max(int(truth.sum()), 1)
    return precision, recall, 2 * precision * recall / max(precision + recall, 1e-12)


def signal(found: TriageScores, name: str) -> np.ndarray:
    return np.array([SIGNALS[name](scores) for scores in found.hit_scores])


def top_hit_row(older: TriageScores, newer: TriageScores, name: str) -> tuple[float, list[str]]:
    """The threshold (chosen on older) of answering by ``name``, and the cells: it, precision, recall, F1
    (newer), AP (newer)."""
    _, _, _, threshold = best_f1(signal(older, name), older.top_hit_labels)
    precision, recall, f1 = at_threshold(signal(newer, name), newer.top_hit_labels, threshold)
    ap = average_precision(signal(newer, name), newer.top_hit_labels)
    return threshold, [f"{threshold:.3f}", *(f"{100 * v:.1f}" for v in (precision, recall, f1, ap))]


def without_masters(newer: RetrievalCollection, model) -> tuple[int, list[list[float]]]:
    """The newer reports searched in an index left without any of their masters (reports whose duplicate is
    not filed: every top hit is wrong): the documents indexed, and each report's hit scores, best first."""
    masters = {d for q in newer.queries for d in newer.relevant(q)}
    documents = [doc for key, doc in newer.corpus.items() if key not in masters]
    retriever = IndexRetriever(RetrievalSettings())
    retriever.index(model, documents)
    found = retriever.search(model, [newer.queries[q] for q in drawn_queries(newer)], LEAD_HITS)
    return len(documents), [[hit.score for hit in row] for row in found]


def choice_rows(older: TriageScores, unseen: TriageScores | None) -> list[list[str]]:
    """Each candidate signal's best F1 and AP on the older reports (the choice: best F1), and for the record
    on ``unseen`` (SciFact's test queries), which the choice did not look at."""
    rows = []
    for name in SIGNALS:
        row = [name]
        for found in (older, unseen) if unseen is not None else (older,):
            values = signal(found, name)
            f1 = best_f1(values, found.top_hit_labels)[0]
            row += [f"{100 * f1:.1f}", f"{100 * average_precision(values, found.top_hit_labels):.1f}"]
        rows.append(row)
    return rows


def scifact_scores(data: str | None, model) -> dict[str, TriageScores]:
    """SciFact's train and test queries searched in one index: each split's top-hit scores."""
    folder = split_collection("scifact", data)
    parts = {split: read_beir(folder, split) for split in ("train", "test")}
    both = RetrievalCollection(
        "scifact", "train+test", parts["test"].corpus,
        {**parts["train"].queries, **parts["test"].queries}, {**parts["train"].qrels, **parts["test"].qrels},
    )  # fmt: skip
    assert not set(parts["train"].queries) & set(parts["test"].queries), "SciFact's splits share a query id"
    found = TriageEvaluator(both, negatives=0).scores(model)
    order = drawn_queries(both)
    out = {}
    for split, part in parts.items():
        rows = [i for i, q in enumerate(order) if q in part.queries]
        out[split] = TriageScores(
            np.array([]), [], [found.hit_scores[i] for i in rows], [found.top_hit_labels[i] for i in rows]
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--negatives", type=int, default=1, help="hard non-duplicates per report")
    parser.add_argument("--data", default=None)
    parser.add_argument("--no-scifact", action="store_true", help="leave out the SciFact rows (the longest part)")
    parser.add_argument("--out", default="triage.md")
    args = parser.parse_args()
    began, load_before = time.perf_counter(), os.getloadavg()[0]
    folder = split_collection("openoffice-dups", args.data)
    parts = {split: read_beir(folder, split) for split in ("train", "test")}
    judged = {split: TriageEvaluator(c, negatives=args.negatives) for split, c in parts.items()}
    counts, rows, top_rows, alone_rows, choice, right = {}, [], [], [], [], {}
    for label, path in MODELS.items():
        if path != "default" and not Path(path).is_dir():
            print(f"skipping {label}: {path} is missing (run the benchmark that makes it)")
            continue
        model = sbert.load(str(path), device="cpu")
        older, newer = (judged[s].scores(model) for s in parts)
        counts[label] = {"train": older.pair_labels, "test": newer.pair_labels}
        _, _, _, threshold = best_f1(older.pair_scores, older.pair_labels)
        precision, recall, f1 = at_threshold(newer.pair_scores, newer.pair_labels, threshold)
        oracle = best_f1(newer.pair_scores, newer.pair_labels)
        ap = average_precision(newer.pair_scores, newer.pair_labels)
        rows.append([label, f"{threshold:.3f}", f"{100 * precision:.1f}", f"{100 * recall:.1f}", f"{100 * f1:.1f}",
                     f"{100 * oracle[0]:.1f} at {oracle[3]:.3f}", f"{100 * ap:.1f}"])  # fmt: skip
        right[label] = 100 * np.mean(newer.top_hit_labels)
        indexed, alone = without_masters(parts["test"], model)
        for name in ("cosine of the top hit", CHOSEN):
            threshold, cells = top_hit_row(older, newer, name)
            top_rows.append([label, f"{right[label]:.1f}", name, *cells])
            said = np.mean([SIGNALS[name](scores) >= threshold for scores in alone])
            alone_rows.append([label, name, cells[0], f"{100 * said:.1f}", cells[1]])
        if path == "default":
            scifact = None if args.no_scifact else scifact_scores(args.data, model)
            choice = choice_rows(older, scifact["test"] if scifact else None)
            if scifact:
                for name in ("cosine of the top hit", CHOSEN):
                    share = 100 * np.mean(scifact["test"].top_hit_labels)
                    _, cells = top_hit_row(scifact["train"], scifact["test"], name)
                    top_rows.append([f"{label}, on SciFact", f"{share:.1f}", name, *cells])
        print(rows[-1], *top_rows[-2:], sep="\n", flush=True)
    header = ["model", "threshold (chosen on older)", "precision", "recall", "F1",
              "newer part's own best F1 (bound)", "AP"]  # fmt: skip
    top_header = ["model", "top hit right (% of newer reports)", "answered by", "threshold (chosen on older)",
                  "precision", "recall", "F1", "AP"]  # fmt: skip
    alone_header = ["model", "answered by", "threshold (chosen on older)", "'yes' with no master indexed",
                    "precision with masters indexed"]  # fmt: skip
    first = next(iter(counts.values()))
    counts = {s: (sum(first[s]), len(first[s]) - sum(first[s])) for s in ("train", "test")}
    queries = {s: len(drawn_queries(c)) for s, c in parts.items()}
    lines = [
        "# Triage: is this report a duplicate?",
        "",
        "**Pairs** (`--threshold`): a report and its master against the report and its best-ranked other master.",
        "",
        *markdown_table(header, rows),
        "",
        f"Pairs: older part {counts['train'][0]:,} duplicates / {counts['train'][1]:,} hard non-duplicates; newer "
        f"part {counts['test'][0]:,} / {counts['test'][1]:,}; each model's pairs hold its own search's hardest "
        "non-duplicate (as `sbert eval --triage`). Cosine similarity, queries and documents scored as `sbert search` "
        "scores them; precision, recall and F1 x 100 on the newer part at the threshold chosen on the older part.",
        "",
        f"**Top hits** (`--lead`): is a report's top hit its master? {queries['train']:,} older and "
        f"{queries['test']:,} newer reports, each searched dense through the index code; 'yes' answered where the "
        "signal reaches the threshold chosen (best F1) on the older reports; precision, recall, F1 and AP x 100 on "
        "the newer ones (SciFact: is the top abstract one judged relevant? thresholds from its train queries, "
        "figures on its test queries; a collection the choice of signal never saw).",
        "",
        *markdown_table(top_header, top_rows),
        "",
        f"**Reports whose duplicate is not filed**: the {queries['test']:,} newer reports searched again in an "
        f"index left without their masters ({indexed:,} of {len(parts['test'].corpus):,} documents), so that no "
        "top hit is right: how often each answer still says 'yes, the top hit is the duplicate' (false alarms, "
        "x 100; lower is better), beside its precision on the newer reports whose master is indexed (above).",
        "",
        *markdown_table(alone_header, alone_rows),
        "",
        "The choice of signal, on the older reports of openoffice-dups alone (default model; chosen: the best F1), "
        "and the same signals on SciFact's test queries for the record (each at its own best threshold there: not "
        "looked at for the choice):",
        "",
        *markdown_table(["signal", "best F1", "AP", "SciFact: best F1", "SciFact: AP"][: len(choice[0])], choice),
        "",
        f"Wall time {time.perf_counter() - began:.0f} s; load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after.",
        "",
        *environment_lines(torch.get_num_threads(), ("sbert", "torch", "transformers")),
    ]
    write_result(args.out, lines)
    write_between_markers(DOC, BEGIN, END, lines[2:])


if __name__ == "__main__":
    main()
