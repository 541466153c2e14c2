"""``MatryoshkaLoss`` (``sbert.losses.matryoshka``): equal to sentence-transformers' on a fixed batch (loss and
gradients), and ``--matryoshka`` in the training spec."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sbert.data.examples import RetrievalExample, ScoredPair
from sbert.encoder import Encoder
from sbert.losses import CosineRegressionLoss, MultipleNegativesRankingLoss
from sbert.losses.matryoshka import MatryoshkaLoss, parse_dims
from sbert.model_names import resolve
from sbert.modules import StaticEmbedding
from sbert.training.spec import run_spec

ANCHORS = ["a man plays a guitar", "a dog runs in the park", "the stock market fell", "she cooks pasta"]
POSITIVES = ["someone is playing music", "an animal is running", "shares lost value", "a woman makes dinner"]
DIMS = [12, 8, 4]


@pytest.fixture(scope="module")
def parts():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(resolve("default") / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    table = np.random.default_rng(0).normal(size=(tokenizer.get_vocab_size(), 12)).astype(np.float32)
    return tokenizer, table


def _ours(parts, loss, batch):
    encoder = Encoder([StaticEmbedding(*parts)])
    value = MatryoshkaLoss(loss, DIMS)(encoder, batch)
    value.backward()
    return float(value.detach()), encoder.transformer.embedding.weight.grad.numpy()


def _theirs(parts, make_loss, columns, labels):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import losses
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding as StStatic

    tokenizer, table = parts
    model = SentenceTransformer(modules=[StStatic(tokenizer, embedding_weights=table.copy())], device="cpu")
    loss = losses.MatryoshkaLoss(model, make_loss(model, losses), DIMS)
    value = loss([model.tokenize(column) for column in columns], labels)
    value.backward()
    return float(value.detach()), model[0].embedding.weight.grad.numpy()


@pytest.mark.slow
def test_matryoshka_mnrl_equals_sentence_transformers_loss_and_gradients(parts):
    batch = [RetrievalExample(a, p) for a, p in zip(ANCHORS, POSITIVES, strict=True)]
    ours, our_grad = _ours(parts, MultipleNegativesRankingLoss(20.0), batch)
    theirs, their_grad = _theirs(
        parts, lambda m, losses: losses.MultipleNegativesRankingLoss(m), [ANCHORS, POSITIVES], None
    )
    assert abs(ours - theirs) <= 1e-5
    assert np.abs(our_grad - their_grad).max() <= 1e-5


@pytest.mark.slow
def test_matryoshka_regression_equals_sentence_transformers_loss_and_gradients(parts):
    scores = [4.0, 2.5, 5.0, 0.5]
    batch = [ScoredPair(a, p, s) for a, p, s in zip(ANCHORS, POSITIVES, scores, strict=True)]
    ours, our_grad = _ours(parts, CosineRegressionLoss((0.0, 5.0)), batch)
    labels = torch.tensor([s / 5 for s in scores])
    theirs, their_grad = _theirs(parts, lambda m, losses: losses.CosineSimilarityLoss(m), [ANCHORS, POSITIVES], labels)
    assert abs(ours - theirs) <= 1e-5
    assert np.abs(our_grad - their_grad).max() <= 1e-5


def test_the_loss_sums_the_wrapped_loss_at_each_width_from_one_forward_pass(parts):
    batch = [RetrievalExample(a, p) for a, p in zip(ANCHORS, POSITIVES, strict=True)]
    encoder = Encoder([StaticEmbedding(*parts)])
    calls = []
    real = encoder.embed_with_grad
    encoder.embed_with_grad = lambda *groups, roles=None: calls.append(groups) or real(*groups, roles=roles)
    total = MatryoshkaLoss(MultipleNegativesRankingLoss(20.0), DIMS)(encoder, batch)
    assert len(calls) == 1
    alone = []
    for dim in DIMS:
        u, v = (torch.nn.functional.normalize(t[:, :dim], dim=-1) for t in real(ANCHORS, POSITIVES))
        logits = 20.0 * u @ v.T
        alone.append(torch.nn.functional.cross_entropy(logits, torch.arange(4)))
    assert total.item() == pytest.approx(sum(alone).item(), rel=1e-5)


def test_dims_are_parsed_checked_and_refused_where_they_cannot_apply(tmp_path):
    assert parse_dims("64, 384,128") == (384, 128, 64)
    for bad in ("384,abc", "0,64", "64,64", ""):
        with pytest.raises(ValueError, match="matryoshka dims"):
            parse_dims(bad)
    (tmp_path / "triplets.tsv").write_text("a\tb\tc\n", encoding="utf-8")
    base = {
        "out": str(tmp_path / "o"),
        "objectives": [{"objective": "mnrl", "format": "triplets", "train": str(tmp_path / "triplets.tsv")}],
    }
    assert run_spec({**base, "matryoshka": [384, 128]}).matryoshka_dims == (384, 128)
    assert run_spec({**base, "matryoshka": "384,128"}).matryoshka_dims == (384, 128)
    assert run_spec(base).matryoshka_dims == ()
    cached = {**base, "objectives": [{**base["objectives"][0], "objective": "cached-mnrl"}]}
    with pytest.raises(ValueError, match="not objective 'cached-mnrl'"):
        run_spec({**cached, "matryoshka": "64"})
