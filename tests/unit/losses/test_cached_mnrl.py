"""Gradient-cached in-batch negatives: the same loss and gradients as the plain loss, the same steps as
sentence-transformers' CachedMultipleNegativesRankingLoss, and dropout replayed in the second pass."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import TINY_WORDS as WORDS
from torch import nn

import sbert
from sbert.data.examples import LabeledPair, RetrievalExample, Triplet
from sbert.data.paths import data_dir
from sbert.errors import InputFileError
from sbert.losses import CachedMultipleNegativesRankingLoss, MultipleNegativesRankingLoss
from sbert.losses.in_batch import text_columns
from sbert.losses.objectives import OBJECTIVES, LossInputs
from sbert.training import Objective, TrainConfig, Trainer
from sbert.training.trainer import _param_groups

# Ten rows, with 0, 1 or 2 hard negatives each: the candidates are ragged across the batch.
BATCH = [
    RetrievalExample(
        f"{WORDS[i]} and {WORDS[i + 1]}",
        f"a {WORDS[i]} met a {WORDS[i + 1]} today",
        tuple(f"{WORDS[(i + k + 3) % 16]} far from {WORDS[i]}" for k in range(i % 3)),
    )
    for i in range(10)
]


def no_dropout(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0


def gradients(encoder, loss, batch) -> tuple[float, dict[str, torch.Tensor]]:
    encoder.zero_grad(set_to_none=True)
    value = loss(encoder, batch)
    value.backward()
    grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    encoder.zero_grad(set_to_none=True)
    return value.item(), grads


def assert_same_gradients(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], rtol: float = 1e-5) -> None:
    """Equal up to float32 rounding: within rtol of the largest gradient coordinate (sums over many tokens)."""
    assert a.keys() == b.keys() and a
    worst = max(a, key=lambda n: (a[n] - b[n]).abs().max().item())
    scale = max(g.abs().max().item() for g in b.values())
    assert (a[worst] - b[worst]).abs().max().item() <= rtol * max(1.0, scale), f"largest difference in {worst}"


def test_columns_lay_out_candidates_as_sentence_transformers_does():
    batch = [
        RetrievalExample("q1", "p1", ("n1a", "n1b")),
        Triplet("q2", "p2", "n2a"),
        LabeledPair("q3", "p3", 0),
    ]
    assert text_columns(batch) == [["q1", "q2", "q3"], ["p1", "p2", "p3"], ["n1a", "n2a"], ["n1b"]]
    with pytest.raises(ValueError, match="non-empty batch"):
        text_columns([])


class FixedEncoder:
    """Stands in for an Encoder: each text's vector is given up front."""

    device = torch.device("cpu")

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_with_grad(self, *groups, roles=None):
        return tuple(torch.tensor([self.vectors[t] for t in group], dtype=torch.float32) for group in groups)


def test_ragged_hard_negatives_by_hand():
    """Row 1 has two hard negatives, row 2 none: both rows see all four wrong candidates."""
    s = 2**-0.5
    enc = FixedEncoder({"q1": [1, 0], "q2": [0, 1], "p1": [1, 0], "p2": [s, s], "n1": [0, 1], "n2": [-1, 0]})
    batch = [RetrievalExample("q1", "p1", ("n1", "n2")), RetrievalExample("q2", "p2")]
    # candidates p1, p2, n1, n2; cosines of q1: 1, s, 0, -1; of q2: 0, s, 1, 0; scale 2
    row1 = -math.log(math.exp(2) / sum(math.exp(2 * c) for c in (1, s, 0, -1)))
    row2 = -math.log(math.exp(2 * s) / sum(math.exp(2 * c) for c in (0, s, 1, 0)))
    for loss in (MultipleNegativesRankingLoss(scale=2.0), CachedMultipleNegativesRankingLoss(2.0, mini_batch_size=1)):
        assert loss(enc, batch).item() == pytest.approx((row1 + row2) / 2, rel=1e-6)


def test_mini_batch_size_must_be_positive():
    with pytest.raises(ValueError, match="mini_batch_size must be at least 1"):
        CachedMultipleNegativesRankingLoss(mini_batch_size=0)


def test_the_objective_table_builds_the_cached_loss_with_its_settings():
    kind = OBJECTIVES["cached-mnrl"]
    loss = kind.bi_encoder(LossInputs({**kind.settings, "mini_batch_size": 4, "scale": 10}, dim=16))
    assert isinstance(loss, CachedMultipleNegativesRankingLoss)
    assert (loss.mini_batch_size, loss.scale) == (4, 10.0)
    assert kind.needs[0] is RetrievalExample and OBJECTIVES["mnrl"].needs == kind.needs


@pytest.mark.parametrize("mini_batch_size", [1, 3, 64])
def test_cached_loss_and_gradients_equal_the_plain_loss(tiny_encoder, mini_batch_size):
    no_dropout(tiny_encoder)
    plain_value, plain = gradients(tiny_encoder, MultipleNegativesRankingLoss(scale=20.0), BATCH)
    cached_value, cached = gradients(tiny_encoder, CachedMultipleNegativesRankingLoss(20.0, mini_batch_size), BATCH)
    assert cached_value == pytest.approx(plain_value, abs=1e-6)
    assert plain_value > 0.1  # a loss that is not already solved: the gradients carry information
    assert_same_gradients(cached, plain)


def test_without_gradients_the_cached_loss_is_the_plain_loss(tiny_encoder):
    no_dropout(tiny_encoder)
    with torch.no_grad():
        plain = MultipleNegativesRankingLoss()(tiny_encoder, BATCH)
        cached = CachedMultipleNegativesRankingLoss(mini_batch_size=4)(tiny_encoder, BATCH)
    assert not cached.requires_grad
    assert cached.item() == pytest.approx(plain.item(), abs=1e-6)


def _same_mini_batches_with_a_graph(encoder, batch, mini_batch_size, scale=20.0) -> dict[str, torch.Tensor]:
    """The gradient the cached loss must give with dropout on: every mini-batch embedded once with a graph,
    in the cached loss's order (so dropout draws the same masks), the loss taken on all of them."""
    columns = []
    for texts in text_columns(batch):
        pieces = [
            encoder.embed_with_grad(texts[i : i + mini_batch_size])[0] for i in range(0, len(texts), mini_batch_size)
        ]
        columns.append(torch.cat(pieces))
    anchors, candidates = columns[0], torch.cat(columns[1:])
    scores = nn.functional.normalize(anchors, dim=1) @ nn.functional.normalize(candidates, dim=1).T * scale
    nn.functional.cross_entropy(scores, torch.arange(len(batch))).backward()
    grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    encoder.zero_grad(set_to_none=True)
    return grads


def test_dropout_masks_of_the_first_pass_are_replayed(tiny_encoder):
    tiny_encoder.train()  # dropout 0.1
    torch.manual_seed(7)
    expected = _same_mini_batches_with_a_graph(tiny_encoder, BATCH, 3)
    torch.manual_seed(7)
    _, cached = gradients(tiny_encoder, CachedMultipleNegativesRankingLoss(20.0, 3), BATCH)
    assert_same_gradients(cached, expected)
    torch.manual_seed(8)  # other masks give other gradients: the comparison above can fail
    other = _same_mini_batches_with_a_graph(tiny_encoder, BATCH, 3)
    assert max((other[n] - expected[n]).abs().max().item() for n in expected) > 1e-4


def test_the_replay_leaves_the_random_stream_where_the_first_pass_left_it(tiny_encoder):
    tiny_encoder.train()
    torch.manual_seed(3)
    loss = CachedMultipleNegativesRankingLoss(mini_batch_size=4)(tiny_encoder, BATCH)
    after_forward = torch.get_rng_state()
    loss.backward()
    assert torch.equal(torch.get_rng_state(), after_forward)


# -- against sentence-transformers ------------------------------------------------------------------------
st = pytest.importorskip("sentence_transformers")
STEPS, ROWS, MINI, LR, EPS = 3, 8, 3, 2e-5, 1e-6  # eps: see test_training_equivalence


@pytest.fixture(scope="module")
def ntuples() -> list[RetrievalExample]:
    """(premise, entailment, contradiction, neutral) rows of SNLI dev: two hard negatives each."""
    from sbert.data.nli import read_nli

    try:
        folder = data_dir()
    except InputFileError as err:
        pytest.skip(str(err))
    by_premise: dict[str, dict[int, str]] = {}
    for pair in list(read_nli(folder / "nli" / "snli_senteval" / "dev"))[:900]:
        by_premise.setdefault(pair.sentence1, {}).setdefault(pair.label, pair.sentence2)
    rows = [RetrievalExample(p, h[0], (h[2], h[1])) for p, h in by_premise.items() if len(h) == 3]
    assert len(rows) >= STEPS * ROWS
    return rows[: STEPS * ROWS]


def _reference_loss(objective: str, model):
    try:
        from sentence_transformers.sentence_transformer import losses
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers import losses
    if objective == "cached-mnrl":
        return losses.CachedMultipleNegativesRankingLoss(model, scale=20.0, mini_batch_size=MINI)
    return losses.MultipleNegativesRankingLoss(model, scale=20.0)


def _reference_steps(reference, ref_loss, examples, plan, seed: int) -> list[float]:
    from transformers import get_linear_schedule_with_warmup

    params = [p for p in ref_loss.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(_param_groups(params, 0.01), lr=LR, eps=EPS)
    scheduler = get_linear_schedule_with_warmup(optimizer, 1, STEPS)  # ceil(0.1 * 3) = 1 warm-up step
    ref_loss.train()
    torch.manual_seed(seed)  # as our trainer seeds before its first step: the same dropout masks
    values = []
    for _, rows in plan:
        batch = [examples[r] for r in rows]
        columns = [[e.query for e in batch], [e.positive for e in batch]]
        columns += [[e.negatives[k] for e in batch] for k in range(2)]
        value = ref_loss([reference.preprocess(c) for c in columns], torch.zeros(len(batch)))
        value.backward()
        values.append(value.item())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    return values


@pytest.mark.slow  # loads the default model twice and trains it
@pytest.mark.parametrize(("objective", "dropout"), [("cached-mnrl", False), ("cached-mnrl", True), ("mnrl", False)])
def test_a_few_steps_match_sentence_transformers(objective, dropout, ntuples, tmp_path):
    ours = sbert.load("default", device="cpu")
    reference = st.SentenceTransformer(str(ours.path), device="cpu")
    if not dropout:
        no_dropout(ours)
        no_dropout(reference)
    start = {k: v.clone() for k, v in ours.transformer.model.state_dict().items()}
    kind = OBJECTIVES[objective]
    loss = kind.bi_encoder(LossInputs({**kind.settings, "mini_batch_size": MINI}, ours.dim))
    config = TrainConfig(batch_size=ROWS, lr=LR, max_steps=STEPS, adam_eps=EPS, checkpoint_every=None, progress=False)
    trainer = Trainer(ours, [Objective(ntuples, loss, objective)], config, tmp_path / "ours")
    plan = trainer.epoch_plan(0)[:STEPS]
    trainer.train(handle_signals=False)
    ref_values = _reference_steps(reference, _reference_loss(objective, reference), ntuples, plan, config.seed)

    log = [json.loads(line) for line in (tmp_path / "ours.train" / "log.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in log if "loss" in r] == pytest.approx(ref_values, abs=1e-5)
    mine, theirs = ours.transformer.model.state_dict(), reference[0].auto_model.state_dict()
    moved = max((mine[k] - start[k]).abs().max().item() for k in start)
    assert moved > 2e-5, "training did not move the weights, so the comparison would prove nothing"
    diffs = {k: (mine[k] - theirs[k]).abs().max().item() for k in mine}
    worst = max(diffs, key=diffs.get)
    assert diffs[worst] <= 1e-5, f"largest parameter difference {diffs[worst]:.2e}, in {worst}"
