"""Fine-tune the default model on STSb with the paper's regression objective, and score it before and after.

Shows: the pieces `sbert train --objective regression --format stsb` puts together: scored pairs, the loss
(MSE between cos(u, v) and the gold score scaled to [0, 1]), the trainer with the paper's recipe (batch 16,
AdamW at 2e-5, 10% warm-up), and STSb test's Spearman correlation through the evaluator `sbert eval` uses.
Run: `python examples/finetune_stsb.py --out models/stsb [--epochs 4] [--limit N]`. The full recipe (4
epochs over 5,749 pairs) takes about 10 minutes on 2 CPU cores; `--limit 500 --epochs 1` well under one.
Data: $SBERT_DATA (or ../shared/data)/stsbenchmark.
"""

import argparse
from pathlib import Path

import sbert
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb
from sbert.evaluation.sts import STSEvaluator
from sbert.losses.regression import CosineRegressionLoss
from sbert.training import Objective, TrainConfig, Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a new folder for the fine-tuned model")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--limit", type=int, help="train on the first N pairs only (a quick try)")
    parser.add_argument("--data", type=Path, help="the data folder (default: $SBERT_DATA or ../shared/data)")
    args = parser.parse_args()
    folder = data_dir(args.data) / "stsbenchmark"
    train = list(read_stsb(folder / "sts-train.csv"))[: args.limit]
    test = STSEvaluator(list(read_stsb(folder / "sts-test.csv")), name="stsb-test")

    model = sbert.load()
    print(f"before: STSb test Spearman x 100 = {test(model)['spearman_cosine']:.2f}")
    objective = Objective(train, CosineRegressionLoss(score_range=(0.0, 5.0)), "stsb")
    Trainer(model, [objective], TrainConfig(epochs=args.epochs), args.out).train()  # saves to --out
    tuned = sbert.load(args.out)
    print(f"after {args.epochs} epoch(s) on {len(train)} pairs: {test(tuned)['spearman_cosine']:.2f}")


if __name__ == "__main__":
    main()
