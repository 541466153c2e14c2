"""Fine-tuning the default model for retrieval, as benchmarks/retrieval.py runs it.

1. Training pairs: SciFact's train judgments; openoffice-dups' judgments of the queries filed before a
   cut-off in time (``sbert.data.time_split``: the oldest 80%; the newer 20% are the test set).
2. Hard negatives mined by the default model (``sbert.search.negatives``): from ranks ``range_min`` to
   ``range_max`` of the corpus, skipping the query's positives and any candidate scoring within a
   relative margin of 5% of the positive (likely unlabelled positives).
3. In-batch negatives with the mined negative (``mnrl``, batch 32: every other row's positive and
   negative are negatives too), the paper's schedule (AdamW, lr 2e-5, 10% linear warm-up), one epoch;
   two for openoffice-dups, whose ~2,000 training queries give only 62 steps an epoch (one epoch reached
   +4.80 MRR@10 over the default model, two are measured in benchmarks/results/retrieval.md).
   (``cached-mnrl`` takes the same steps in less memory, for larger batches; at batch 32 plain ``mnrl``
   fits in memory and saves GradCache's extra forward pass, which matters on 2 CPU cores.)

The same on the command line (DIR: a BEIR folder with a train split; for openoffice-dups the folder
``split_by_time`` writes, see docs/training.md; ``--epochs 2`` there, 1 for SciFact):

    sbert mine-negatives DIR --split train --num-negatives 1 --range-min 10 --range-max 50 \\
        --relative-margin 0.05 --keep-incomplete --out negatives.jsonl
    sbert train --objective mnrl --format ntuples --train negatives.jsonl --batch-size 32 --epochs 2 \\
        --out models/retrieval
    sbert eval models/retrieval --retrieval DIR --split test --dense   # the model alone, as measured here
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import sbert
from benchmarks.lib import WORK
from benchmarks.lib.reference import paper_recipe
from benchmarks.lib.retrieval_data import split_collection
from sbert.data.beir import RetrievalCollection, read_beir

RECIPE = {"num_negatives": 1, "range_min": 10, "range_max": 50, "relative_margin": 0.05}
TRAINING = {"objective": "mnrl", "batch_size": 32, "epochs": 1}
TRAINING_FOR = {"openoffice-dups": {"epochs": 2}}  # per collection, over TRAINING


def training(name: str) -> dict:
    """The training settings for collection ``name``."""
    return {**TRAINING, **TRAINING_FOR.get(name, {})}


def mined_examples(name: str, data: str | None, device: str = "cpu", folder: Path | None = None) -> list:
    """(query, positive, mined negative) rows of ``name``'s training part (or of the BEIR ``folder``'s
    ``train`` split), negatives mined by the default model with ``RECIPE`` (queries left without a
    negative kept)."""
    from sbert.search.negatives import NegativeFilters, mine_hard_negatives

    train = read_beir(folder or split_collection(name, data), "train")
    mined = mine_hard_negatives(
        sbert.load("default", device=device),
        train.queries,
        train.document_texts(),
        train.qrels,
        NegativeFilters(**RECIPE),
        keep_incomplete=True,
    )
    print(f"  {name}: rows without a negative to mine: {mined.skipped}", flush=True)
    return mined.examples()


def training_config(name: str, train_steps: int | None, **overrides):
    """The paper's recipe at ``name``'s epochs and batch size (``training``), with ``overrides``."""
    settings = training(name)
    config = paper_recipe(settings["epochs"], max_steps=train_steps)
    return type(config)(**{**config.__dict__, "batch_size": settings["batch_size"], **overrides})


def fine_tune(name: str, collection: RetrievalCollection, args) -> Path | None:
    """A model fine-tuned on ``name``'s training part (reused when this recipe trained one already)."""
    from sbert.losses.in_batch import MultipleNegativesRankingLoss
    from sbert.training import Objective, Trainer
    from sbert.training.recipe import build_encoder

    quick = args.train_steps is not None
    out = WORK / "retrieval" / f"{name}-finetuned{'-quick' if quick else ''}"
    settings = training(name)
    recipe = {**RECIPE, **settings, "max_steps": args.train_steps}
    done = out.with_name(out.name + ".json")
    if done.is_file() and json.loads(done.read_text())["recipe"] == recipe and out.is_dir():
        return out
    if out.exists():  # an earlier recipe's model: replaced
        import shutil

        shutil.rmtree(out)
    began = time.perf_counter()
    examples = mined_examples(name, args.data)
    mining = time.perf_counter() - began
    print(f"  mined {len(examples)} training rows in {mining:.0f} s", flush=True)
    encoder = build_encoder("default", device="cpu")
    loss = MultipleNegativesRankingLoss(20.0)
    config = training_config(name, args.train_steps)
    summary = Trainer(encoder, [Objective(examples, loss, name)], config, out).train()
    done.write_text(json.dumps({"recipe": recipe, "mining_seconds": mining, "summary": summary}, default=str))
    print(f"  trained {summary['steps']} steps in {summary['seconds']:.0f} s", flush=True)
    return out


RERANKER = {"num_negatives": 3, "range_min": 3, "range_max": 30, "relative_margin": 0.05}
RERANKER_TRAINING = {"batch_size": 16, "epochs": 1, "max_length": 256, "lr": 2e-5}


def train_reranker(name: str, args) -> Path:
    """A cross-encoder for ``name``: the default model's transformer with a new one-label head, trained
    (BCE) on the training part's (query, relevant document) pairs as 1 and negatives mined by the default
    model (ranks 3 to 30, 5% below the positive) as 0. Reused when this recipe trained one already."""
    import torch

    from sbert.cross_encoder import CrossEncoder
    from sbert.data.examples import ScoredPair
    from sbert.losses.cross_encoder import CrossEncoderScoreLoss
    from sbert.search.negatives import NegativeFilters, mine_hard_negatives
    from sbert.training import Objective, Trainer

    out = WORK / "retrieval" / f"{name}-reranker{'-quick' if args.train_steps is not None else ''}"
    recipe = {**RERANKER, **RERANKER_TRAINING, "max_steps": args.train_steps}
    done = out.with_name(out.name + ".json")
    if done.is_file() and json.loads(done.read_text())["recipe"] == recipe and out.is_dir():
        return out
    train = read_beir(split_collection(name, args.data), "train")
    texts = train.document_texts()
    mined = mine_hard_negatives(
        sbert.load("default", device="cpu"),
        train.queries,
        texts,
        train.qrels,
        NegativeFilters(**RERANKER),
        keep_incomplete=True,
    )
    pairs = []
    for row in mined.rows:
        query = train.queries[row.query_id]
        pairs.append(ScoredPair(query, texts[row.positive_id], 1.0))
        pairs += [ScoredPair(query, texts[negative], 0.0) for negative in row.negative_ids]
    torch.manual_seed(42)  # the new head
    model = CrossEncoder.load("default", num_labels=1, max_length=RERANKER_TRAINING["max_length"], device="cpu")
    config = paper_recipe(RERANKER_TRAINING["epochs"], max_steps=args.train_steps)
    config = type(config)(
        **{**config.__dict__, "batch_size": RERANKER_TRAINING["batch_size"], "lr": RERANKER_TRAINING["lr"]}
    )
    loss = CrossEncoderScoreLoss(score_range=(0.0, 1.0))
    summary = Trainer(model, [Objective(pairs, loss, f"{name}-reranker")], config, out).train()
    done.write_text(json.dumps({"recipe": recipe, "pairs": len(pairs), "summary": summary}, default=str))
    print(f"  reranker: {len(pairs)} pairs, {summary['steps']} steps in {summary['seconds']:.0f} s", flush=True)
    return out
