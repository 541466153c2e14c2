"""Regenerate the README's pictures of embeddings: docs/img/map.png and docs/img/heatmap.png.

The map: 400 distinct STSb test sentences (seeded draw), embedded with the default model
(all-MiniLM-L6-v2), UMAP to 2-D, coloured by 8 k-means clusters. The heatmap: six sentences in three
pairs of paraphrases and near-misses. Both are what `sbert plot map` and `sbert plot heatmap` draw.

    python docs/make_images.py [--data DIR] [--out docs/img] [--sentences 400]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import sbert
import sbert.plot
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb

HEATMAP_TEXTS = [
    "A man is playing a guitar.",
    "Someone plays an acoustic guitar.",
    "A kitten is sleeping on the couch.",
    "A cat naps on the sofa.",
    "The stock market fell sharply today.",
    "Share prices dropped at the close.",
]


def stsb_sentences(folder: Path, count: int, seed: int = 0) -> list[str]:
    """``count`` distinct sentences of the STSb test split, drawn with ``seed``."""
    pairs = read_stsb(folder / "stsbenchmark" / "sts-test.csv")
    distinct = sorted({s for p in pairs for s in (p.sentence1, p.sentence2)})
    return random.Random(seed).sample(distinct, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="Data folder (default: $SBERT_DATA, else ../shared/data).")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "img")
    parser.add_argument("--sentences", type=int, default=400)
    args = parser.parse_args()
    model = sbert.load("default", device="cpu")
    texts = stsb_sentences(data_dir(args.data), args.sentences)
    figure = sbert.plot.map(texts, model=model, method="umap", clusters="kmeans", cluster_options={"k": 8})
    figure.set_size_inches(10, 6)
    print(sbert.plot.save(figure, args.out / "map.png", dpi=90))
    figure = sbert.plot.heatmap(HEATMAP_TEXTS, model=model)
    print(sbert.plot.save(figure, args.out / "heatmap.png", dpi=90))


if __name__ == "__main__":
    main()
