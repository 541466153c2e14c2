"""Shared fixtures: the default model (loaded once), the reference implementation, and STSb sentences."""

from __future__ import annotations

import random
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

import sbert
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb
from sbert.errors import InputFileError

# A suite started as a background job (`nohup pytest &`) inherits SIGINT ignored, and so would every process
# it starts: the Ctrl-C tests would then test nothing. Restore Python's own handler (children then start
# with SIGINT at its default), so those tests mean the same however the suite is launched.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The fast tier, `pytest -m "not slow"`: what needs no model, no training and no server answers in
# well under a minute. A test is slow when it uses a fixture that loads a model or reads the reference
# implementation, or lives in a module that trains, starts processes or servers.
MODEL_FIXTURES = {
    "model",
    "reference",
    "tiny_encoder",
    "stsb_sentences",
    "saved",
    "tiny_model",
    "tiny_dense_folder",
    "cross",
    "two_ranks",  # test_distributed: trains in two processes
}
# Slow without such a fixture: large brute-force comparisons, model folders built inside the test.
SLOW_TESTS = {
    "test_choose_c_and_cross_validation_on_separable_data",
    "test_hnsw_recall_at_10_on_20000_vectors",
    "test_links_leading_outside_the_folder_are_refused",
    "test_load_never_imports_sentence_transformers",
    "test_mining_equals_brute_force_on_500_texts",
    "test_mining_with_exact_scores_does_not_depend_on_chunk_sizes",
    "test_non_finite_weights_are_refused_at_load_naming_the_file",
    "test_scores_and_order_do_not_depend_on_chunk_sizes",
    "test_semantic_search_equals_brute_force_with_odd_chunks",
    "test_single_modes_and_every_ordered_triple_equal_sentence_transformers",
    "test_transfer_evaluation_shows_its_folds_when_asked",
    "test_hub_cache_layout_links_into_its_blobs_are_allowed",
    "test_truncated_pickle_weights_name_the_folder",
}
SLOW_MODULES = {
    "test_cli_train",
    "test_cross_encoder",
    "test_docs",
    "test_evaluation_reference",
    "test_index_concurrency",
    "test_onnx",
    "test_remote_code",
    "test_serve",
    "test_serve_robust",
    "test_st_formats",
    "test_train_interrupt",
    "test_trainer",
    "test_training_equivalence",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module else ""
        name = getattr(item, "originalname", item.name)
        if module in SLOW_MODULES or name in SLOW_TESTS or MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
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
