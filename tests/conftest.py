"""Shared fixtures: the default model (loaded once), the reference implementation, and STSb sentences."""

from __future__ import annotations

import random

import pytest

import sbert
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb
from sbert.errors import InputFileError


@pytest.fixture(scope="session")
def model():
    return sbert.load("default", device="cpu")


@pytest.fixture(scope="session")
def reference():
    """sentence-transformers' SentenceTransformer on the same default model folder."""
    st = pytest.importorskip("sentence_transformers")
    return st.SentenceTransformer(str(sbert.load("default", device="cpu").path), device="cpu")


@pytest.fixture(scope="session")
def stsb_sentences() -> list[str]:
    """400 distinct STSb test sentences of varied length, in shuffled order."""
    try:
        folder = data_dir()
    except InputFileError as err:
        pytest.skip(str(err))
    sentences = sorted(
        {s for p in read_stsb(folder / "stsbenchmark" / "sts-test.csv") for s in (p.sentence1, p.sentence2)}
    )
    random.Random(0).shuffle(sentences)
    return sentences[:400]


def make_tiny_encoder(seed: int = 0, dropout: float = 0.1):
    """A 1-layer, 16-wide BERT with the default model's tokenizer: fast enough to train in a test."""
    import torch
    from transformers import BertConfig, BertModel

    from sbert.encoder import Encoder
    from sbert.modules import Pooling, Transformer

    tokenizer = sbert.load("default", device="cpu").transformer.tokenizer
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    torch.manual_seed(seed)
    return Encoder([Transformer(BertModel(config), tokenizer, max_seq_length=32), Pooling(16, "mean")])


@pytest.fixture()
def tiny_encoder():
    return make_tiny_encoder()
