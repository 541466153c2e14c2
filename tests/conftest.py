"""Shared fixtures (the default model loaded once a process, the reference implementation, STSb sentences, tiny
models), the slow-tier rule and ``slow_fixture``, and what every test module can import by name."""

from __future__ import annotations

import copy
import functools
import os
import random
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sbert
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb
from sbert.errors import InputFileError
from sbert.model_names import resolve

# A suite started as a background job (`nohup pytest &`) inherits SIGINT ignored, and so would every process
# it starts: the Ctrl-C tests would then test nothing. Restore Python's own handler (children then start
# with SIGINT at its default), so those tests mean the same however the suite is launched.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Under pytest-xdist (`-n auto`) each worker is one process among several on the same cores: torch's threads
# share them out (one each on 2 cores and 2 workers) instead of every worker starting a thread per core and all
# of them waiting on each other. Set before torch is imported; OMP_NUM_THREADS given by the caller wins.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // _WORKERS)))

# Every folder of tests is on sys.path, as pytest's default import mode puts a test module's own folder there
# when it collects it: a module imports a shared module or another test module by its name (``from test_beir import
# write_beir``, ``from conftest import make_tiny_encoder``) whichever files a run selects. Module names are
# therefore unique across folders (pytest refuses a second ``test_x.py``).
TESTS = Path(__file__).resolve().parent
for _folder in [TESTS, *sorted(p for p in TESTS.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

# The fast tier, `pytest -m "not slow"`: what needs no model, no training and no server. A test is slow when
# it carries ``@pytest.mark.slow`` (or its module sets ``pytestmark = pytest.mark.slow``), or when it uses a
# fixture declared with ``slow_fixture`` below (one that loads a model or trains), directly or through
# another fixture.


def slow_fixture(*, scope: str = "function") -> Callable[[Callable[..., Any]], Any]:
    """``pytest.fixture(scope=...)`` for a fixture that loads a model, trains or starts processes: every
    test that uses it, directly or through another fixture, is marked slow."""

    def declare(func: Callable[..., Any]) -> Any:
        func.slow = True  # type: ignore[attr-defined]
        return pytest.fixture(scope=scope)(func)

    return declare


def _uses_slow_fixture(item: pytest.Item) -> bool:
    defs = getattr(item, "_fixtureinfo", None)
    chosen = [d[-1] for d in defs.name2fixturedefs.values() if d] if defs else []
    return any(getattr(d.func, "slow", False) for d in chosen)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _uses_slow_fixture(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def children_temp_dir(tmp_path_factory) -> Path:
    """What the tests start keeps its temporary files in one folder removed at the end, not in /tmp:
    torchrun's ``torchelastic_*``, Ray's session folders, Chromium's profiles (all follow ``TMPDIR``).
    A short path under the system's temp folder: Ray and Chromium put Unix sockets there (108 bytes
    at most a path). pytest's own ``tmp_path`` folders and this process's ``tempfile`` stay where they were."""
    tmp_path_factory.getbasetemp()
    tempfile.gettempdir()  # cached before TMPDIR changes
    root = Path(tempfile.mkdtemp(prefix="sbert-tests-"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(root))
        yield root
    shutil.rmtree(root, ignore_errors=True)


@slow_fixture(scope="session")
def model():
    return sbert.load("default", device="cpu")


@slow_fixture(scope="session")
def reference():
    """sentence-transformers' SentenceTransformer on the same default model folder."""
    st = pytest.importorskip("sentence_transformers")
    return st.SentenceTransformer(str(resolve("default")), device="cpu")


@slow_fixture(scope="session")
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


TINY_WORDS = [
    "cat",
    "dog",
    "bird",
    "fish",
    "horse",
    "cow",
    "sheep",
    "goat",
    "mouse",
    "lion",
    "tiger",
    "bear",
    "wolf",
    "fox",
    "deer",
    "owl",
]  # texts for tiny models


@functools.cache
def _default_tokenizer():
    """The default model's tokenizer, loaded once a process (each tiny encoder gets a copy of its own)."""
    return sbert.load("default", device="cpu").transformer.tokenizer


def make_tiny_encoder(seed: int = 0, dropout: float = 0.1):
    """A 1-layer, 16-wide BERT with the default model's tokenizer: fast enough to train in a test."""
    import torch
    from transformers import BertConfig, BertModel

    from sbert.encoder import Encoder
    from sbert.modules import Pooling, Transformer

    tokenizer = copy.deepcopy(_default_tokenizer())
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


@slow_fixture()
def tiny_encoder():
    return make_tiny_encoder()


def count_forward_rows(encoder) -> list[int]:
    """Rows each forward pass of ``encoder``'s sentence runner runs, appended as they run (a spy: the
    vectors are the runner's own)."""
    rows: list[int] = []
    run = encoder._runner.sentences

    def counted(features, packed=False):
        rows.append(len(features["input_ids"]))
        return run(features, packed)

    encoder._runner.sentences = counted
    return rows
