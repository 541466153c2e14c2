"""Semantic search over your own texts: embed them once, then find the closest to each query.

Shows: loading the default model, building an index in memory with `sbert.Index` (embeddings and BM25
beside them, fused when searching: the code `sbert index build` + `sbert search` run), and printing the
hits with their cosines (which read the same for every query, unlike the fused score that ranks them).
Run: `python examples/semantic_search.py [texts.txt] [--query "..."]` (one text per line). About
10 seconds on 2 CPU cores for the built-in texts, most of it loading the model.
"""

import argparse
from pathlib import Path

import sbert

TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
]
QUERIES = ["A man is eating pasta.", "Someone in a gorilla costume is playing drums.", "A cheetah chases prey."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("texts", nargs="?", type=Path, help="a file with one text per line")
    parser.add_argument("--query", action="append", help="a query (repeatable)")
    parser.add_argument("-k", type=int, default=3)
    args = parser.parse_args()
    texts = args.texts.read_text(encoding="utf-8").splitlines() if args.texts else TEXTS
    texts = [t for t in texts if t.strip()]

    model = sbert.load()  # all-MiniLM-L6-v2, shipped in a package: nothing is downloaded
    index = sbert.Index.build(texts, model=model)  # in memory; path="folder" writes one `sbert search` reads
    queries = args.query or QUERIES
    for query, hits in zip(queries, index.search(queries, k=args.k), strict=True):
        print(f"\n{query}")
        for hit in hits:
            print(f"  cosine {hit.cosine:.3f}  {hit.text}")  # hit.score: the fused rank score


if __name__ == "__main__":
    main()
