"""What ``--auto`` costs, and what reusing vectors saves: ``sbert eval --auto`` / ``sbert index build --auto``
embed a collection to choose (whole, then in windows, with the held-out documents changed) and again to
index it the chosen way. Within ``Encoder.reusing_vectors`` a token sequence embedded once is looked up,
so only the held-out documents and the windows that differ from whole documents are embedded anew.

For each collection: the tokens (and texts) the model runs for ``AutoRetriever.index`` (choice + index,
exactly as ``sbert eval --auto`` runs it), with and without reuse, counted by a stand-in runner that
returns random vectors (so the count is the model's work, not this machine's speed; the choice it makes
from random vectors is then BM25's, whole documents); and, with ``--time``, the wall time of the real
model for both, one after the other in one process, on the collections named there. Writes
``benchmarks/results/auto_cost.md``.

    python -m benchmarks.auto_cost [--collections scifact,openoffice-dups] [--time openoffice-dups]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator

import torch

import sbert
import sbert.search.auto as auto
from benchmarks.lib import environment_lines, markdown_table, write_result
from sbert.data.beir import read_beir
from sbert.data.paths import data_dir
from sbert.evaluation.retrievers import RetrievalSettings


@contextlib.contextmanager
def without_reuse() -> Iterator[None]:
    """``--auto`` as it ran before vectors were reused: every text embedded each time it is met."""
    kept = auto.reusing_vectors
    auto.reusing_vectors = lambda encoder: contextlib.nullcontext()
    try:
        yield
    finally:
        auto.reusing_vectors = kept


def run_auto(model, documents, reuse: bool) -> tuple[float, str]:
    """(wall seconds, what was chosen) of one ``AutoRetriever.index``."""
    retriever = RetrievalSettings(auto=True).retriever()
    began = time.perf_counter()
    with contextlib.nullcontext() if reuse else without_reuse():
        retriever.index(model, documents, show_progress=False)
    return time.perf_counter() - began, retriever.result.choice.name


def counted(model, documents, reuse: bool) -> tuple[int, int]:
    """(tokens, texts) the model would run, counted by a stand-in runner (random vectors)."""
    tokens, texts = [0], [0]
    real = model._runner.sentences

    def stand_in(features, packed=False):
        tokens[0] += int(features["attention_mask"].sum())
        texts[0] += len(features["input_ids"])
        return torch.rand(len(features["input_ids"]), model.model_dim)

    model._runner.sentences = stand_in
    try:
        run_auto(model, documents, reuse)
    finally:
        model._runner.sentences = real
    return tokens[0], texts[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", default="scifact,openoffice-dups")
    parser.add_argument("--time", default="", help="collections to time with the real model too (comma-separated)")
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    model = sbert.load("default", device="cpu")
    rows, timed = [], []
    for name in args.collections.split(","):
        documents = list(read_beir(data_dir(args.data) / "retrieval" / name, "test").corpus.values())
        (plain_tokens, plain_texts), (reuse_tokens, reuse_texts) = (counted(model, documents, r) for r in (False, True))
        saved = 100 * (1 - reuse_tokens / plain_tokens)
        rows.append([name, f"{len(documents):,}", f"{plain_tokens:,} ({plain_texts:,})"])
        rows[-1] += [f"{reuse_tokens:,} ({reuse_texts:,})", f"{saved:.0f}%"]
        print(rows[-1], flush=True)
        if name in args.time.split(","):
            load = os.getloadavg()[0]
            (plain_s, plain_choice), (reuse_s, reuse_choice) = (run_auto(model, documents, r) for r in (False, True))
            timed.append([name, f"{plain_s:,.0f}", f"{reuse_s:,.0f}", f"{plain_s / reuse_s:.2f}x"])
            timed[-1] += [plain_choice if plain_choice == reuse_choice else f"{plain_choice} / {reuse_choice}"]
            timed[-1] += [f"{load:.2f} / {os.getloadavg()[0]:.2f}"]
            print(timed[-1], flush=True)
    header = ["collection", "documents", "tokens (texts) embedded, each time met", "with reuse", "saved"]
    lines = [
        "The default model's work for `--auto` (choose on 200 held-out pseudo-queries, then index the chosen "
        "way: `AutoRetriever.index`, what `sbert eval --auto` and `sbert index build --auto` run), counted by a "
        "stand-in runner. Test queries are not included (they are embedded once either way).",
        "",
        *markdown_table(header, rows),
        "",
    ]
    if timed:
        header = ["collection", "seconds, each time met", "seconds, with reuse", "speed-up", "chose", "load avg"]
        lines += ["Wall time with the real model, one after the other in one process:", ""]
        lines += [*markdown_table(header, timed), ""]
    lines += environment_lines(torch.get_num_threads(), ("torch", "transformers", "sbert"))
    write_result("auto_cost.md", ["# What `--auto` costs: vectors reused", "", *lines])


if __name__ == "__main__":
    main()
