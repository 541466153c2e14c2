"""Guided in-batch negatives (GISTEmbed), SimCSE over texts alone, and the no-duplicates sampler, by hand
and against sentence-transformers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import make_tiny_encoder
from test_losses import FixedEncoder

import sbert
from sbert.data.examples import LabeledPair, RetrievalExample, Text, Triplet
from sbert.losses import CachedMultipleNegativesRankingLoss, MultipleNegativesRankingLoss
from sbert.losses.in_batch import Dropped, Guide
from sbert.losses.objectives import OBJECTIVES, LossInputs
from sbert.losses.teachers import Teacher
from sbert.training.sampling import example_texts, no_duplicate_batches

VECTORS = {"q1": [1.0, 0.0], "p1": [1.0, 1.0], "q2": [0.0, 1.0], "p2": [0.0, 2.0]}


class FixedModel:
    """A frozen model whose vectors are given up front: a guide to check masks by hand."""

    similarity_fn_name = "cosine"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts, batch_size=32, show_progress=None):
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def test_the_guide_drops_candidates_it_scores_above_the_positive():
    enc = FixedEncoder(VECTORS)
    batch = [LabeledPair("q1", "p1", 0), LabeledPair("q2", "p2", 0)]
    # the guide thinks p2 answers q1 better than p1 does: p2 leaves row 0's softmax, which keeps only p1
    guide_vectors = {"q1": [1.0, 0, 0], "p1": [1.0, 1, 0], "q2": [0.0, 0, 1], "p2": [1.0, 0, 0.5]}
    guide = Guide(Teacher(FixedModel(guide_vectors)))
    assert guide.mask([["q1", "q2"], ["p1", "p2"]], torch.device("cpu")).tolist() == [[False, True], [False, False]]
    c = 1 / math.sqrt(2)  # cos(q2, p1); cos(q2, p2) = 1
    row1 = -math.log(math.exp(20) / (math.exp(20) + math.exp(20 * c)))
    assert MultipleNegativesRankingLoss(guide=guide)(enc, batch).item() == pytest.approx(row1 / 2, rel=1e-5)
    row0 = -math.log(math.exp(20 * c) / (math.exp(20 * c) + 1))  # without the guide row 0 pays for p2 (cos 0)
    assert MultipleNegativesRankingLoss()(enc, batch).item() == pytest.approx((row0 + row1) / 2, rel=1e-5)


def test_the_guide_counts_what_it_drops():
    guide_vectors = {"q1": [1.0, 0, 0], "p1": [1.0, 1, 0], "q2": [0.0, 0, 1], "p2": [1.0, 0, 0.5], "n1": [1.0, 0, 0]}
    guide, cpu = Guide(Teacher(FixedModel(guide_vectors))), torch.device("cpu")
    guide.mask([["q1", "q2"], ["p1", "p2"]], cpu)  # row 0 drops p2 (cos .89 > .71)
    assert guide.counts == Dropped(rows=2, candidates=2, dropped=1, rows_dropped=1)
    # a hard-negative column: row 0 drops p2 and n1 (cos 1), row 1 drops nothing (its p2 scores .45; n1 0)
    assert guide.mask([["q1", "q2"], ["p1", "p2"], ["n1"]], cpu).tolist() == [
        [False, True, True],
        [False, False, False],
    ]
    assert guide.counts == Dropped(rows=4, candidates=6, dropped=3, rows_dropped=2)
    assert str(guide.counts) == "3 of 6 in-batch candidates dropped (50.00%), in 2 of 4 rows"


def test_the_trainer_says_what_the_guide_dropped(tiny_encoder, tmp_path):
    from sbert.training import Objective, TrainConfig, Trainer
    from sbert.training.recipe import finished_message

    guide_vectors = {"q1": [1.0, 0, 0], "p1": [1.0, 1, 0], "q2": [0.0, 0, 1], "p2": [1.0, 0, 0.5]}
    loss = MultipleNegativesRankingLoss(guide=Guide(Teacher(FixedModel(guide_vectors))))
    rows = [RetrievalExample("q1", "p1"), RetrievalExample("q2", "p2")]
    config = TrainConfig(batch_size=2, epochs=2, shuffle=False, progress=False, checkpoint_every=None)
    summary = Trainer(tiny_encoder, [Objective(rows, loss, "dups")], config, tmp_path / "m").train()
    # two steps, each the same batch: row 0 drops p2 both times
    assert summary["guide_dropped"] == {"dups": {"rows": 4, "candidates": 4, "dropped": 2, "rows_dropped": 2}}
    assert "dups: 2 of 4 in-batch candidates dropped (50.00%), in 2 of 4 rows by the guide" in finished_message(summary)
    plain = Trainer(
        make_tiny_encoder(), [Objective(rows, MultipleNegativesRankingLoss(), "dups")], config, tmp_path / "n"
    )
    unguided = plain.train()
    assert "guide_dropped" not in unguided and "guide" not in finished_message(unguided)


def test_margin_strategies():
    sims = {"q1": [1.0, 0.0], "p1": [0.8, 0.6], "q2": [0.0, 1.0], "p2": [0.6, 0.8]}  # guide(q1,p1)=.8, (q1,p2)=.6
    columns = [["q1", "q2"], ["p1", "p2"]]
    cpu = torch.device("cpu")
    assert not Guide(Teacher(FixedModel(sims))).mask(columns, cpu)[0, 1]
    assert Guide(Teacher(FixedModel(sims)), "absolute", 0.25).mask(columns, cpu)[0, 1]  # .6 > .8 - .25
    assert not Guide(Teacher(FixedModel(sims)), "relative", 0.2).mask(columns, cpu)[0, 1]  # .6 > .64 is false
    assert Guide(Teacher(FixedModel(sims)), "relative", 0.3).mask(columns, cpu)[0, 1]  # .6 > .56
    with pytest.raises(ValueError, match="margin_strategy 'both': expected one of absolute, relative"):
        Guide(Teacher(FixedModel(sims)), "both")


def test_simcse_is_in_batch_negatives_of_each_text_with_itself():
    enc = FixedEncoder(VECTORS)
    texts = [Text("q1"), Text("p2"), Text("p1")]
    loss = OBJECTIVES["simcse"].bi_encoder(LossInputs(OBJECTIVES["simcse"].settings, 2))
    expected = MultipleNegativesRankingLoss()(enc, [LabeledPair(t.text, t.text, 0) for t in texts])
    assert loss(enc, texts).item() == pytest.approx(expected.item())
    assert example_texts(texts[0]) == ("q1",)


def test_the_cached_loss_applies_the_same_mask(tiny_encoder):
    for m in tiny_encoder.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    batch = [RetrievalExample(f"cat {i}", f"dog {i}", (f"bird {i}",)) for i in range(6)]
    guide = Guide(Teacher(tiny_encoder), "relative", 0.05)
    assert guide.mask(
        [[e.query for e in batch], [e.positive for e in batch], [e.negatives[0] for e in batch]], tiny_encoder.device
    ).any()
    values = []
    for loss in (
        MultipleNegativesRankingLoss(guide=guide),
        CachedMultipleNegativesRankingLoss(mini_batch_size=2, guide=guide),
    ):
        tiny_encoder.zero_grad(set_to_none=True)
        value = loss(tiny_encoder, batch)
        value.backward()
        values.append((value.item(), [p.grad.clone() for p in tiny_encoder.parameters() if p.grad is not None]))
    assert values[0][0] == pytest.approx(values[1][0], abs=1e-6)
    for a, b in zip(values[0][1], values[1][1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


# -- against sentence-transformers ------------------------------------------------------------------------
TRIPLETS = [
    Triplet("the editor crashes on save", "a crash when saving a file", "printing is slow"),
    Triplet("saving crashes the editor", "crash on save", "tables lose borders"),
    Triplet("tables lose their borders", "borders of a table vanish", "cannot open docx"),
    Triplet("docx files do not open", "cannot open docx", "a crash when saving"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("strategy", "margin"), [("absolute", 0.0), ("relative", 0.1)])
def test_guided_loss_equals_sentence_transformers_gist(strategy, margin):
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer import losses

    ours = sbert.load("default", device="cpu")
    reference = st.SentenceTransformer(str(ours.path), device="cpu")
    guide_reference = st.SentenceTransformer(str(ours.path), device="cpu")
    for model in (ours, reference):
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
    guide = Guide(Teacher("default"), strategy, margin)
    columns = [[t.anchor for t in TRIPLETS], [t.positive for t in TRIPLETS], [t.negative for t in TRIPLETS]]
    assert guide.mask(columns, torch.device("cpu")).any(), "a mask that drops nothing would prove nothing"
    loss = MultipleNegativesRankingLoss(scale=20.0, guide=guide)
    value = loss(ours, TRIPLETS)
    value.backward()
    gist = losses.GISTEmbedLoss(
        reference,
        guide_reference,
        temperature=0.05,
        margin_strategy=strategy,
        margin=margin,
        contrast_anchors=False,
        contrast_positives=False,
    )
    theirs = gist([reference.preprocess(c) for c in columns], torch.zeros(len(TRIPLETS)))
    theirs.backward()
    assert value.item() == pytest.approx(theirs.item(), abs=1e-5)
    mine = dict(ours.transformer.model.named_parameters())
    graded = [(n, p.grad) for n, p in reference[0].auto_model.named_parameters() if p.grad is not None]
    assert graded and all((mine[n].grad is None) == (g is None) for n, g in graded)
    assert max((g - mine[n].grad).abs().max().item() for n, g in graded) <= 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 3])
def test_the_sampler_gives_sentence_transformers_batches(seed):
    pytest.importorskip("sentence_transformers")
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler

    class Dataset:  # what the sampler reads of a datasets.Dataset (that package is not installed here)
        column_names = ("anchor", "positive")

        def __init__(self, columns):
            self.columns = columns

        @classmethod
        def from_dict(cls, columns):
            return cls(columns)

        def __len__(self):
            return len(self.columns["anchor"])

        def __getitem__(self, i):
            return {k: v[i] for k, v in self.columns.items()}

    rows = [RetrievalExample(f"dup{i}", "master") for i in range(5)] + [
        RetrievalExample(f"report {i}", f"original {i % 7}") for i in range(20)
    ]
    dataset = Dataset.from_dict({"anchor": [r.query for r in rows], "positive": [r.positive for r in rows]})
    generator = torch.Generator()
    theirs = list(NoDuplicatesBatchSampler(dataset, 4, drop_last=False, generator=generator, seed=seed))
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).tolist()
    ours = no_duplicate_batches(order, lambda r: example_texts(rows[r]), 4)
    assert [b.tolist() for b in ours.batches] == theirs[: len(ours.batches)]


class CountingModel(FixedModel):
    """A ``FixedModel`` that counts the texts it is asked to encode."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        super().__init__(vectors)
        self.encoded: list[str] = []

    def encode(self, texts, batch_size=32, show_progress=None):
        self.encoded += texts
        return super().encode(texts, batch_size, show_progress)


def test_a_teacher_encodes_each_text_once_up_to_its_cache_size():
    model, cpu = CountingModel(VECTORS), torch.device("cpu")
    teacher = Teacher(model, cache_size=2)
    first = teacher.vectors(["q1", "p1", "q1"], cpu)
    assert first.tolist() == [[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]]
    assert model.encoded == ["q1", "p1"]  # a text twice in one call: encoded once
    again = teacher.vectors(["p1", "q2", "q1"], cpu)
    assert again.tolist() == [[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]
    assert model.encoded == ["q1", "p1", "q2"]  # q1 and p1 from the cache; q2 new
    teacher.vectors(["q2"], cpu)
    assert model.encoded == ["q1", "p1", "q2", "q2"]  # the cache was full (2 texts): q2 was not kept


def test_a_teacher_remembers_vectors_saved_by_an_earlier_run():
    model, cpu = CountingModel(VECTORS), torch.device("cpu")
    saved = Teacher(CountingModel(VECTORS)).vectors(["q1", "p2"], cpu)
    teacher = Teacher(model, cache_size=3)
    teacher.remember(["q1", "p2"], saved.double())
    assert teacher.vectors(["p2", "q1"], cpu).tolist() == [[0.0, 2.0], [1.0, 0.0]]
    assert model.encoded == []  # both remembered: nothing encoded
    teacher.remember(["q1", "q2", "p1"], torch.tensor([[9.0, 9.0], [0.0, 1.0], [1.0, 1.0]]))
    assert teacher.vectors(["q1", "q2"], cpu).tolist() == [[1.0, 0.0], [0.0, 1.0]]  # q1 kept its vector
    teacher.vectors(["p1"], cpu)
    assert model.encoded == ["p1"]  # the cache held 3 texts: p1 was not remembered
    with pytest.raises(ValueError, match="one vector per text: 2 texts, vectors of shape \\(1, 2\\)"):
        teacher.remember(["q1", "p1"], torch.zeros(1, 2))
