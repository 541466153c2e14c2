"""Fit the default model to your documents without labels, then search with it.

Shows: `sbert.adapt.adapt` (what `sbert adapt` runs): each document's title becomes the query of its
body, and the model trains on those pairs with in-batch negatives; then the same query searched with
the default and the adapted model, side by side.
Run: `python examples/adapt_then_search.py reports.jsonl --out models/reports --query "..."` (JSON lines
with "title" and "text"; CSV/TSV with those columns too). With the default 100 steps, a few minutes
for a couple of thousand short documents on a quiet 2-core machine; `--steps 10` to try it.
"""

import argparse
from pathlib import Path

import sbert
from sbert.adapt import AdaptSettings, adapt
from sbert.data.corpus import read_corpus
from sbert.search.retrieve import SearchOptions, build_index, search_texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="a new folder for the adapted model")
    parser.add_argument("--query", required=True)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    summary = adapt("default", args.corpus, args.out, AdaptSettings(steps=args.steps, batch_size=args.batch_size))
    print(f"adapted on {summary['pairs']} pairs from {summary['documents']} documents: {args.out}")

    corpus = read_corpus(args.corpus)  # the same reader `sbert index build` uses: ids, titles, texts
    for name in ("default", args.out):
        model = sbert.load(name)
        index = build_index(None, model, corpus.texts, corpus.ids, model=str(name), titles=corpus.titles, bm25=False)
        hits = search_texts(index, model, [args.query], SearchOptions(k=3))[0]
        print(f"\n{name}:")
        for hit in hits:
            print(f"  {hit.score:.3f}  [{hit.id}] {hit.text[:80]}")


if __name__ == "__main__":
    main()
