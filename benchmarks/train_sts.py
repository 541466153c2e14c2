"""STSb regression training: sbert's trainer against sentence-transformers' own, side by side.

The paper's regression recipe (Table 2, second block): cosine(u, v) against the gold score / 5, MSE,
on STSb train; 4 epochs, batch 16, AdamW lr 2e-5, 10% linear warm-up then linear decay, mean
pooling. Both start from the same weights (the default model) and see the same data with the same
hyper-parameters and seed value; each library orders the batches with its own sampler. Both trained
models are scored by the same evaluator (Spearman x 100 of cosine on STSb test). The
randomly initialised encoder of the same shape is the "no pre-training" control (sbert only).

    python -m benchmarks.train_sts [--epochs 4] [--skip-reference] [--skip-random] [--max-steps N]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

import sbert
from benchmarks.lib import WORK, environment_lines, markdown_table, write_result
from benchmarks.lib.reference import paper_recipe, st_train
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb
from sbert.evaluation import STSEvaluator
from sbert.losses import CosineRegressionLoss
from sbert.training import Objective, TrainConfig, Trainer
from sbert.training.recipe import build_encoder


def train_ours(train, config: TrainConfig, out, init: str) -> tuple[sbert.Encoder, dict]:
    encoder = build_encoder("default", init=init, pooling="mean", seed=config.seed, device="cpu")
    trainer = Trainer(encoder, [Objective(train, CosineRegressionLoss((0.0, 5.0)), "stsb")], config, out)
    return encoder, trainer.train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=None, help="cap the steps (quick runs)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--skip-random", action="store_true")
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default="train_sts.md")
    args = parser.parse_args()

    folder = data_dir(args.data) / "stsbenchmark"
    train = list(read_stsb(folder / "sts-train.csv"))
    test = STSEvaluator(list(read_stsb(folder / "sts-test.csv")), name="stsb-test")
    config = paper_recipe(args.epochs, args.seed, args.max_steps)
    rows = []
    start_score = test(sbert.load("default", device="cpu"))["spearman_cosine"]
    rows.append(["default model, not fine-tuned", "-", f"{start_score:.2f}", "-", "-", "-"])
    # Full-recipe models are kept in benchmarks/.work for reproduce.py; capped quick runs are thrown away.
    work = WORK if args.max_steps is None else Path(tempfile.mkdtemp())
    ref_score = None
    runs = [("sbert", "pretrained")]
    if not args.skip_reference:
        runs.append(("sentence-transformers", "pretrained"))
    if not args.skip_random:
        runs.append(("sbert", "random"))
    for library, init in runs:
        print(f"training: {library}, {init} start", flush=True)
        if library == "sbert":
            out = work / ("ours-stsb" if init == "pretrained" else "ours-random-stsb")
            model, summary = train_ours(train, config, out, init)
        else:
            out = work / "st-stsb"
            summary = st_train(sbert.load("default").path, train, "regression", config, out)
            model = sbert.load(out, device="cpu")
        score = test(model)["spearman_cosine"]
        ref_score = score if library == "sentence-transformers" else ref_score
        label = f"{library}, from {'the default model' if init == 'pretrained' else 'random weights'}"
        rows.append(
            [
                label,
                summary["steps"],
                f"{score:.2f}",
                f"{summary['steps_per_second']:.2f}",
                f"{summary['seconds'] / 60:.1f}",
                "",
            ]
        )
        print(rows[-1], flush=True)

    ours_row = rows[1]
    if ref_score is not None:
        ref_row = rows[2]
        speed = float(ours_row[3]) / float(ref_row[3])
        ours_row[5] = f"score {float(ours_row[2]) - ref_score:+.2f}, speed {speed:.2f}x"
        ref_row[5] = "reference"
    lines = [
        "# Training on STSb (regression objective): sbert vs sentence-transformers",
        "",
        f"STSb train ({len(train):,} pairs), {args.epochs} epochs"
        f"{f' capped at {args.max_steps} steps' if args.max_steps else ''}, "
        "batch 16, AdamW lr 2e-5 (weight decay 0.01 off biases and LayerNorm), 10% linear warm-up then "
        f"linear decay, gradient norm clipped at 1, mean pooling, seed {args.seed}; CPU, float32. "
        "Score: Spearman x 100 between cosine similarity and gold on STSb test (1,379 pairs), the same "
        "evaluator for every row.",
        "",
        *markdown_table(
            ["run", "steps", "STSb test Spearman", "steps/s", "training minutes", "sbert vs reference"], rows
        ),
        "",
        "**Deviations from the paper.** The paper fine-tunes BERT-base, which is MLM-only pre-trained; no "
        "such model ships here, so the start is all-MiniLM-L6-v2, which is already sentence-tuned (that is "
        "why the untuned score is high). The 'random weights' row is the same architecture with random "
        "weights: the no-pre-training control. Each library draws its own batch order from the seed.",
        "",
        *environment_lines(
            torch.get_num_threads(),
            ("sbert", "torch", "transformers", "sentence-transformers", "accelerate", "datasets"),
        ),
    ]
    write_result(args.out, lines)


if __name__ == "__main__":
    main()
