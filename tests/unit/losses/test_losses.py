"""Each loss against a value computed by hand on tiny vectors."""

from __future__ import annotations

import math

import pytest
import torch

from sbert.data.examples import DistillationExample, LabeledPair, RetrievalExample, ScoredPair, Text, Triplet
from sbert.losses import (
    CONCAT_MODES,
    CosineRegressionLoss,
    MultipleNegativesRankingLoss,
    SoftmaxLoss,
    TripletLoss,
)
from sbert.losses.softmax import parse_concat


class FixedEncoder:
    """Stands in for an Encoder: each text's vector is given up front."""

    device = torch.device("cpu")

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_with_grad(self, *groups, roles=None):
        return tuple(torch.tensor([self.vectors[t] for t in group]) for group in groups)


def test_softmax_loss_by_hand():
    enc = FixedEncoder({"a": [1.0, 2.0], "b": [3.0, 1.0]})
    loss = SoftmaxLoss(dim=2, num_labels=2, concat="u,v,|u-v|")
    assert loss.classifier.in_features == 6
    with torch.no_grad():
        loss.classifier.weight.copy_(torch.tensor([[1.0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1.0, 1.0]]))
        loss.classifier.bias.zero_()
    # features (u, v, |u-v|) = (1, 2, 3, 1, 2, 1): logits (1, 3); label 1
    expected = -math.log(math.exp(3) / (math.exp(1) + math.exp(3)))
    value = loss(enc, [LabeledPair("a", "b", 1)])
    assert value.item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    ("mode", "width"),
    [
        ("u,v", 2),
        ("|u-v|", 1),
        ("u*v", 1),
        ("|u-v|,u*v", 2),
        ("u,v,u*v", 3),
        ("u,v,|u-v|", 3),
        ("u,v,|u-v|,u*v", 4),
    ],
)
def test_classifier_width_for_each_concatenation(mode, width):
    assert mode in CONCAT_MODES
    assert SoftmaxLoss(dim=5, concat=mode).classifier.in_features == 5 * width
    assert SoftmaxLoss(dim=5, concat=f"({mode.replace(',', ', ')})").parts == parse_concat(mode)


def test_concat_values_and_bad_modes():
    from sbert.losses.softmax import concatenate

    u, v = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 4.0]])
    torch.testing.assert_close(concatenate(u, v, ("|u-v|", "u*v")), torch.tensor([[2.0, 6.0, 3.0, -8.0]]))
    with pytest.raises(ValueError, match="expected parts among"):
        parse_concat("u,u")
    with pytest.raises(ValueError, match="expected parts among"):
        parse_concat("u+v")


def test_regression_loss_by_hand():
    enc = FixedEncoder({"a": [1.0, 0.0], "b": [1.0, 1.0], "c": [0.0, 2.0]})
    batch = [ScoredPair("a", "b", 2.5), ScoredPair("a", "c", 5.0)]
    # cos(a,b) = 1/sqrt(2) vs 0.5; cos(a,c) = 0 vs 1.0
    expected = ((1 / math.sqrt(2) - 0.5) ** 2 + (0 - 1.0) ** 2) / 2
    assert CosineRegressionLoss()(enc, batch).item() == pytest.approx(expected, rel=1e-6)
    sick = CosineRegressionLoss(score_range=(1.0, 5.0))(enc, [ScoredPair("a", "c", 3.0)])
    assert sick.item() == pytest.approx(0.5**2, rel=1e-6)


def test_triplet_loss_by_hand_for_each_distance():
    enc = FixedEncoder({"a": [0.0, 0.0], "p": [3.0, 4.0], "n": [0.0, 1.0], "p2": [0.0, 0.5], "n2": [6.0, 8.0]})
    batch = [Triplet("a", "p", "n"), Triplet("a", "p2", "n2")]
    # euclidean: max(5 - 1 + 1, 0) = 5 and max(0.5 - 10 + 1, 0) = 0 -> mean 2.5 (torch adds eps 1e-6)
    assert TripletLoss()(enc, batch).item() == pytest.approx(2.5, abs=1e-5)
    # manhattan: max(7 - 1 + 1, 0) = 7 and 0 -> 3.5
    assert TripletLoss("manhattan")(enc, batch).item() == pytest.approx(3.5, abs=1e-5)
    enc.vectors.update({"a": [1.0, 0.0], "p": [1.0, 1.0], "n": [-1.0, 0.0]})
    # cosine distance: 1 - 1/sqrt(2) vs 2, margin 0.5 -> 0; (1 - 0) - (1 - 0.6) + 0.5 = 1.1
    value = TripletLoss("cosine", margin=0.5)(enc, [Triplet("a", "p", "n"), Triplet("a", "p2", "n2")])
    assert value.item() == pytest.approx((0 + 1.1) / 2, abs=1e-6)


def test_triplet_loss_rejects_unknown_distance():
    with pytest.raises(ValueError, match="distance must be one of"):
        TripletLoss("chebyshev")


def test_in_batch_negatives_by_hand():
    enc = FixedEncoder(
        {
            "a1": [1.0, 0.0],
            "a2": [0.0, 1.0],
            "p1": [1.0, 0.0],
            "p2": [1.0, 1.0],
            "n1": [0.0, 1.0],
            "n2": [-1.0, 0.0],
        }
    )
    s = 20.0
    c = 1 / math.sqrt(2)
    # pairs: anchor i against positives (p1, p2)
    row1 = -math.log(math.exp(s) / (math.exp(s) + math.exp(s * c)))
    row2 = -math.log(math.exp(s * c) / (math.exp(0) + math.exp(s * c)))
    pairs = [LabeledPair("a1", "p1", 1), LabeledPair("a2", "p2", 1)]
    assert MultipleNegativesRankingLoss()(enc, pairs).item() == pytest.approx((row1 + row2) / 2, rel=1e-5)
    # triplets add hard negatives (n1, n2) as candidates for every anchor
    row1 = -math.log(math.exp(s) / (math.exp(s) + math.exp(s * c) + math.exp(0) + math.exp(-s)))
    row2 = -math.log(math.exp(s * c) / (math.exp(0) + math.exp(s * c) + math.exp(s) + math.exp(0)))
    triplets = [Triplet("a1", "p1", "n1"), Triplet("a2", "p2", "n2")]
    assert MultipleNegativesRankingLoss()(enc, triplets).item() == pytest.approx((row1 + row2) / 2, rel=1e-5)


# -- the objectives table: an objective is one entry, its loss built from its settings -----------------------
def test_every_objective_builds_its_loss_from_its_settings():
    from sbert.losses.cross_encoder import CrossEncoderScoreLoss
    from sbert.losses.objectives import OBJECTIVES, LossInputs

    enc = FixedEncoder({"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]})
    batches = {LabeledPair: [LabeledPair("a", "b", 1)], ScoredPair: [ScoredPair("a", "b", 2.5)]}
    batches[Triplet] = [Triplet("a", "c", "b")]
    batches[RetrievalExample] = [RetrievalExample("a", "c", ("b",))]
    batches[Text] = [Text("a"), Text("b")]
    batches[DistillationExample] = [DistillationExample("a", "c", ("b",), (1.0, 0.0))]
    for name, kind in OBJECTIVES.items():
        if name == "embedding-mse":  # a teacher model is its data: refused without one (test_distillation)
            with pytest.raises(ValueError, match="needs a teacher"):
                kind.bi_encoder(LossInputs(kind.settings, dim=2))
            continue
        if name == "tsdae":  # its decoder shares the model's weights: refused without one (test_tsdae)
            with pytest.raises(ValueError, match="needs the model it trains"):
                kind.bi_encoder(LossInputs(kind.settings, dim=2))
            continue
        loss = kind.bi_encoder(LossInputs(kind.settings, dim=2))
        assert torch.isfinite(loss(enc, batches[kind.needs[0]])), name
    sick = OBJECTIVES["regression"]
    assert isinstance(sick.cross_encoder(LossInputs({}, 0, (1.0, 5.0))), CrossEncoderScoreLoss)
    assert (sick.cross_labels({}), OBJECTIVES["classification"].cross_labels({"num_labels": 2})) == (1, 2)
    margin = OBJECTIVES["triplet"].bi_encoder(LossInputs({"margin": 3.0, "distance": "cosine"}, dim=2))
    assert (margin.margin, margin.distance) == (3.0, "cosine")


def test_each_objective_states_its_facts_in_its_entry():
    """What callers ask of an objective (``sbert adapt``: a teacher? in-batch negatives to guide? texts alone?)
    is read from ``OBJECTIVES``, never from its name."""
    from sbert.losses.objectives import OBJECTIVES

    def having(fact):
        return {name for name, kind in OBJECTIVES.items() if getattr(kind, fact)}

    assert having("in_batch") == {"mnrl", "cached-mnrl", "simcse"}
    assert having("needs_teacher") == {"margin-mse", "distill-kl", "embedding-mse"}
    assert having("texts_alone") == {"simcse", "embedding-mse", "tsdae"}
    assert {name for name, kind in OBJECTIVES.items() if "guide" in kind.settings} == having("in_batch")


def test_a_new_objective_is_one_table_entry(monkeypatch, tmp_path):
    """A loss registered in OBJECTIVES is usable from a run specification with its own setting."""
    from sbert.losses.objectives import OBJECTIVES, ObjectiveKind
    from sbert.training.recipe import make_loss, objective_examples
    from sbert.training.spec import run_spec

    class ScaledRegression(CosineRegressionLoss):
        def __init__(self, score_range, weight: float) -> None:
            super().__init__(score_range)
            self.weight = weight

    entry = ObjectiveKind(
        needs=(ScoredPair,),
        settings={"weight": 1.0},
        bi_encoder=lambda x: ScaledRegression(x.score_range, x.settings["weight"]),
    )
    monkeypatch.setitem(OBJECTIVES, "scaled", entry)
    (tmp_path / "sick.txt").write_text("1\tA man eats.\tA man is eating.\t4.5\tENTAILMENT\n")
    spec = run_spec(
        {"out": "m", "objectives": [{"objective": "scaled", "format": "sick", "train": str(tmp_path / "sick.txt")}]}
    )
    objective = spec.objectives[0]
    loss = make_loss(objective, type("Model", (), {"model_dim": 2})())
    assert (type(loss), loss.weight, (loss.low, loss.high)) == (ScaledRegression, 1.0, (1.0, 5.0))
    assert objective_examples(objective) == [ScoredPair("A man eats.", "A man is eating.", 4.5)]
