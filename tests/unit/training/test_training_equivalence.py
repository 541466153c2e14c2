"""Our trainer against sentence-transformers' losses: same start, batches, optimizer and schedule.

The reference side is a plain loop over sentence-transformers' SoftmaxLoss, CosineSimilarityLoss
and TripletLoss (margin 1), with transformers' own linear warm-up schedule. Dropout is off on both
sides so that the two runs see the same function; after a few steps every parameter must agree.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import sbert
from sbert.data.nli import nli_to_triplets, read_nli
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb
from sbert.errors import InputFileError
from sbert.losses import CosineRegressionLoss, SoftmaxLoss, TripletLoss
from sbert.training import Objective, TrainConfig, Trainer
from sbert.training.trainer import _param_groups

pytestmark = pytest.mark.slow  # trains beside sentence-transformers

st = pytest.importorskip("sentence_transformers")
# The paper's rate. Adam turns a gradient that is float noise (attention key biases have zero gradient in
# exact arithmetic; some coordinates of the last LayerNorm nearly so) into a step of up to the learning
# rate whose sign is the noise's. Both sides therefore use eps=1e-6 instead of 1e-8, which damps steps
# on gradients below ~1e-6 and leaves every real gradient's step as it was.
STEPS, BATCH, LR, EPS = 6, 8, 2e-5, 1e-6


def no_dropout(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0


@pytest.fixture(scope="module")
def data():
    try:
        folder = data_dir()
    except InputFileError as err:
        pytest.skip(str(err))
    nli = list(read_nli(folder / "nli" / "snli_senteval" / "dev"))[:600]
    return {
        "regression": list(read_stsb(folder / "stsbenchmark" / "sts-train.csv"))[: STEPS * BATCH],
        "classification": nli[: STEPS * BATCH],
        "triplet": nli_to_triplets(nli)[: STEPS * BATCH],
    }


def reference_loss(kind: str, model, head: dict):
    try:
        from sentence_transformers.sentence_transformer import losses
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers import losses

    if kind == "classification":
        loss = losses.SoftmaxLoss(model, sentence_embedding_dimension=384, num_labels=3)
        loss.classifier.load_state_dict(head)  # the same random head as ours at the start
        return loss
    if kind == "regression":
        return losses.CosineSimilarityLoss(model)
    return losses.TripletLoss(model, distance_metric=losses.TripletDistanceMetric.EUCLIDEAN, triplet_margin=1.0)


def columns_and_labels(kind: str, batch):
    if kind == "classification":
        return [[p.sentence1 for p in batch], [p.sentence2 for p in batch]], [p.label for p in batch]
    if kind == "regression":
        return [[p.sentence1 for p in batch], [p.sentence2 for p in batch]], [p.score / 5.0 for p in batch]
    return [[t.anchor for t in batch], [t.positive for t in batch], [t.negative for t in batch]], [0] * len(batch)


@pytest.mark.parametrize("kind", ["classification", "regression", "triplet"])
def test_a_few_steps_match_sentence_transformers(kind, data, tmp_path):
    from transformers import get_linear_schedule_with_warmup

    examples = data[kind]
    ours = sbert.load("default", device="cpu")
    no_dropout(ours)
    start = {k: v.clone() for k, v in ours.transformer.model.state_dict().items()}
    torch.manual_seed(0)
    loss = {
        "classification": lambda: SoftmaxLoss(ours.dim, 3),
        "regression": lambda: CosineRegressionLoss((0.0, 5.0)),
        "triplet": lambda: TripletLoss("euclidean", margin=1.0),
    }[kind]()
    config = TrainConfig(
        batch_size=BATCH,
        lr=LR,
        warmup=0.1,
        max_steps=STEPS,
        adam_eps=EPS,
        checkpoint_every=None,
        progress=False,
    )
    trainer = Trainer(ours, [Objective(examples, loss, kind)], config, tmp_path / "ours")
    plan = trainer.epoch_plan(0)[:STEPS]
    head_at_start = {k: v.clone() for k, v in loss.state_dict().items()}

    reference = st.SentenceTransformer(str(ours.path), device="cpu")
    no_dropout(reference)
    ref_loss = reference_loss(kind, reference, {k.removeprefix("classifier."): v for k, v in head_at_start.items()})
    trainer.train()

    params = [p for p in ref_loss.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(_param_groups(params, 0.01), lr=LR, eps=EPS)
    scheduler = get_linear_schedule_with_warmup(optimizer, 1, STEPS)  # ceil(0.1 * 6) = 1 warm-up step
    ref_loss.train()
    ref_values = []
    for _, rows in plan:
        cols, labels = columns_and_labels(kind, [examples[r] for r in rows])
        features = [reference.preprocess(c) for c in cols]
        value = ref_loss(features, torch.tensor(labels))
        value.backward()
        ref_values.append(value.item())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()

    log = [json.loads(line) for line in (tmp_path / "ours.train" / "log.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in log if "loss" in r] == pytest.approx(ref_values, abs=1e-5)
    theirs = reference[0].auto_model.state_dict()
    mine = ours.transformer.model.state_dict()
    moved = max((mine[k] - start[k]).abs().max().item() for k in start)
    assert moved > 4e-5, "training did not move the weights, so the comparison would prove nothing"
    diffs = {k: (mine[k] - theirs[k]).abs().max().item() for k in mine}
    worst = max(diffs, key=diffs.get)
    assert diffs[worst] <= 1e-5, f"largest parameter difference {diffs[worst]:.2e}, in {worst}"
    if kind == "classification":
        for k, v in loss.classifier.state_dict().items():
            torch.testing.assert_close(v, ref_loss.classifier.state_dict()[k], rtol=0, atol=1e-5)
