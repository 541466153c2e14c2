"""The training forward applies the model's prompts as encode_query/encode_document do: the losses say
which side a text is on (anchors and queries: "query"; positives, negatives, candidates: "document")."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import make_tiny_encoder

import sbert.distributed
import sbert.training.distributed
from sbert.losses.in_batch import MultipleNegativesRankingLoss

PROMPTS = {"query": "query: ", "document": "passage: ", "classify": "classify: "}
QUERIES, DOCUMENTS = ["a cat on a mat", "why do dogs bark"], ["cats sit on mats", "dogs bark at night"]


@pytest.fixture(scope="module")
def prompted():
    model = make_tiny_encoder(dropout=0.0)
    model.prompts, model.default_prompt_name = PROMPTS, "classify"
    return model.eval()


@pytest.mark.parametrize("include_prompt", [True, False])
def test_the_training_forward_equals_encode_query_and_encode_document(prompted, include_prompt):
    prompted[1].include_prompt = include_prompt
    try:
        with torch.no_grad():
            q, d, plain = prompted.embed_with_grad(QUERIES, DOCUMENTS, DOCUMENTS, roles=["query", "document", None])
            (only_q,) = prompted.embed_with_grad(QUERIES, roles="query")
        np.testing.assert_allclose(q.numpy(), prompted.encode_query(QUERIES), atol=1e-5)
        np.testing.assert_allclose(only_q.numpy(), prompted.encode_query(QUERIES), atol=1e-5)
        np.testing.assert_allclose(d.numpy(), prompted.encode_document(DOCUMENTS), atol=1e-5)
        np.testing.assert_allclose(plain.numpy(), prompted.encode(DOCUMENTS), atol=1e-5)  # the default prompt
        assert not np.allclose(q.numpy(), prompted.encode(QUERIES, prompt=""), atol=1e-3)  # prompts matter here
    finally:
        prompted[1].include_prompt = True
    with pytest.raises(ValueError, match="1 roles for 2 groups"):
        prompted.embed_with_grad(QUERIES, DOCUMENTS, roles=["query"])


def test_an_in_batch_loss_trains_anchors_as_queries_and_positives_as_documents(prompted):
    from sbert.data.examples import RetrievalExample

    batch = [RetrievalExample(q, d) for q, d in zip(QUERIES, DOCUMENTS, strict=True)]
    loss = MultipleNegativesRankingLoss(scale=20.0)
    with torch.no_grad():
        value = loss(prompted, batch)
    q = torch.from_numpy(prompted.encode_query(QUERIES, normalize=True))
    d = torch.from_numpy(prompted.encode_document(DOCUMENTS, normalize=True))
    expected = torch.nn.functional.cross_entropy(20.0 * q @ d.T, torch.arange(2))
    assert value.item() == pytest.approx(expected.item(), abs=1e-4)


def test_the_distributed_helpers_moved_below_training():
    assert sbert.training.distributed is sbert.distributed
