"""One base model, a small LoRA adapter per collection: fit each without labels, index and search each.

Shows: `sbert.adapt.adapt` with `AdaptSettings(lora=LoraSettings())` (what `sbert adapt --lora` runs): the
base's weights stay as they are and each collection gets a folder of a few MB that names its base; then
`sbert.Index.build` over each adapter and the same query searched in each collection. `sbert serve
--adapter NAME=FOLDER --index NAME=INDEX` then serves them all on one base.
Run: `python examples/one_base_many_trackers.py writer.jsonl calc.jsonl --out models --query "..."` (JSON
lines with "title" and "text"; CSV/TSV too). With the default 100 steps, a few minutes per collection of a
couple of thousand short documents on a quiet 2-core machine; `--steps 10` to try it.
"""

import argparse
from pathlib import Path

import sbert
from sbert.adapt import AdaptSettings, adapt
from sbert.adapters import LoraSettings
from sbert.data.corpus import read_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", type=Path, nargs="+", help="a collection's documents, one file each")
    parser.add_argument("--out", type=Path, required=True, help="a folder for the adapters, one per collection")
    parser.add_argument("--query", required=True)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    settings = AdaptSettings(steps=args.steps, batch_size=args.batch_size, lora=LoraSettings())
    for corpus in args.corpora:
        folder = args.out / corpus.stem
        adapt("default", corpus, folder, settings)  # the adapter only: no base weights
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6
        documents = read_corpus(corpus)  # the reader `sbert index build` uses: ids, titles, texts
        index = sbert.Index.build(documents.texts, ids=documents.ids, titles=documents.titles, model=folder)
        print(f"\n{corpus.stem}: adapter {folder} ({size:.1f} MB)")
        for hit in index.search(args.query, k=3):
            print(f"  {hit.score:.3f}  [{hit.id}] {hit.text[:80]}")


if __name__ == "__main__":
    main()
