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
