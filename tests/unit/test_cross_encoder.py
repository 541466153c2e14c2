"""CrossEncoder: pair encoding, smart-batched predict in input order, save/load, equivalence with
sentence-transformers' CrossEncoder, and that a few optimiser steps move its score."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sbert.cross_encoder import CrossEncoder
from sbert.errors import ModelNotFoundError

pytestmark = pytest.mark.slow  # loads and trains a cross-encoder

PAIRS = [
    ("A man eats food.", "Someone is eating."),
    ("A cat sleeps.", "The stock market fell sharply today, analysts said."),
    ("Hi", "Hello there, how are you doing on this fine day?"),
    ("Two dogs run through a field of tall grass.", "Dogs run."),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A cross-encoder made from the default model's transformer with a seeded one-label head."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ce") / "model"
    CrossEncoder.load("default", num_labels=1, device="cpu").save(path)
    return path


@pytest.fixture(scope="module")
def cross(folder):
    return CrossEncoder.load(folder, device="cpu")


def test_pair_encoding_and_longest_first_truncation(cross):
    tok = cross.tokenizer
    enc = cross.tokenize([("a cat", "the dog barks")])
    ids, types = enc["input_ids"][0], enc["token_type_ids"][0]
    a, b = (
        tok("a cat", add_special_tokens=False)["input_ids"],
        tok("the dog barks", add_special_tokens=False)["input_ids"],
    )
    assert ids == [tok.cls_token_id, *a, tok.sep_token_id, *b, tok.sep_token_id]
    assert types == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    cross_short = CrossEncoder(cross.model, cross.tokenizer, max_length=10)
    long_a = "one two three four five six seven eight nine ten"
    enc = cross_short.tokenize([(long_a, "cat dog")])
    assert len(enc["input_ids"][0]) == 10
    kept_b = enc["input_ids"][0][-3:-1]
    assert kept_b == tok("cat dog", add_special_tokens=False)["input_ids"]  # the longer side was cut


def test_predict_keeps_input_order_under_smart_batching(cross):
    pairs = PAIRS * 3
    together = cross.predict(pairs, batch_size=3)
    alone = np.array([cross.predict([p])[0] for p in pairs])
    assert together.shape == (12,)
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert len(set(np.round(together[:4], 4))) == 4  # distinct scores, so order matters


def test_save_load_round_trip(cross, tmp_path):
    cross.save(tmp_path / "again")
    again = CrossEncoder.load(tmp_path / "again", device="cpu")
    assert again.activation == "sigmoid" and again.num_labels == 1
    np.testing.assert_array_equal(again.predict(PAIRS), cross.predict(PAIRS))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again"]  # no temporary folder left


def test_equivalent_to_sentence_transformers(folder, cross):
    st = pytest.importorskip("sentence_transformers.cross_encoder")
    reference = st.CrossEncoder(str(folder), device="cpu").predict(PAIRS * 2, batch_size=3)
    assert np.abs(cross.predict(PAIRS * 2, batch_size=5) - reference).max() <= 1e-5


def test_rank_sorts_documents(cross):
    docs = [b for _, b in PAIRS]
    ranked = cross.rank(PAIRS[0][0], docs, top_k=3)
    scores = cross.predict([(PAIRS[0][0], d) for d in docs])
    assert [i for i, _ in ranked] == list(np.argsort(-scores, kind="stable")[:3])
    assert ranked[0][1] == pytest.approx(float(scores.max()))


def test_a_few_steps_move_the_score(folder):
    model = CrossEncoder.load(folder, device="cpu")
    pair, target = [PAIRS[1]], torch.tensor([[1.0]])
    before = model.predict(pair)[0]
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4)
    encoded = model.tokenize(pair)
    model.train()
    for _ in range(5):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(model._collate(encoded, np.arange(1))), target
        )
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    assert model.predict(pair)[0] > before + 0.05


def test_bad_inputs(cross, tmp_path):
    with pytest.raises(TypeError, match="list of"):
        cross.predict(("a", "b"))
    with pytest.raises(TypeError, match=r"pairs\[1\]"):
        cross.predict([("a", "b"), ("only one",)])
    with pytest.raises(ValueError, match="empty"):
        cross.predict([("a", " ")])
    with pytest.raises(ModelNotFoundError, match=r"no config\.json"):
        CrossEncoder.load(tmp_path)


def test_sts_evaluation_of_a_cross_encoder(cross):
    from scipy.stats import spearmanr

    from sbert.data.examples import ScoredPair
    from sbert.evaluation.sts import STSEvaluator
    from sbert.evaluation.tasks import headline

    pairs = [ScoredPair(a, b, float(i)) for i, (a, b) in enumerate(PAIRS)]
    metrics = STSEvaluator(pairs)(cross)
    expected = 100 * spearmanr([p.score for p in pairs], cross.predict(PAIRS)).statistic
    assert headline("sts", metrics) == ("spearman_score", pytest.approx(expected))


def test_rerank_library_and_cli(cross, folder, model, tmp_path):
    from click.testing import CliRunner

    from sbert.cli import main
    from sbert.search.index.folder import VectorIndex
    from sbert.search.rerank import rerank

    docs = [b for _, b in PAIRS]
    index = VectorIndex.build(tmp_path / "ix", model.encode(docs), model="default", texts=docs)
    hits = index.search(model.encode([PAIRS[0][0]]), 4)[0]
    reranked = rerank(cross, PAIRS[0][0], hits, top_k=2)
    scores = cross.predict([(PAIRS[0][0], d) for d in docs])
    assert [h.row for h in reranked] == list(np.argsort(-scores, kind="stable")[:2])
    assert reranked[0].score == pytest.approx(float(scores.max()))
    result = CliRunner().invoke(
        main, ["search", str(tmp_path / "ix"), PAIRS[0][0], "-k", "2", "--rerank", str(folder), "--json"]
    )
    assert result.exit_code == 0, result.output
    import json

    got = json.loads(result.stdout)[0]["hits"]
    assert [h["row"] for h in got] == [h.row for h in reranked]


def test_sbert_train_cross_encoder_moves_scores_toward_gold(tmp_path):
    import json

    from click.testing import CliRunner

    from sbert.cli import main

    rows = [("A man plays a guitar.", "A man plays music.", 4.8), ("A cat sleeps.", "The market fell.", 0.2)] * 8
    data = tmp_path / "train.csv"
    data.write_text(
        "".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s:.3f}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(rows)),
        encoding="utf-8",
    )
    out = tmp_path / "ce"
    args = ["train", "--cross-encoder", "--objective", "regression", "--format", "stsb", "--train", str(data)]
    args += ["--dev", str(data), "--dev-format", "stsb", "--out", str(out), "--lr", "1e-4", "--epochs", "3"]
    args += ["--batch-size", "4", "--eval-every", "4", "--no-progress"]
    pairs = [(a, b) for a, b, _ in rows[:2]]
    torch.manual_seed(42)  # the run seeds its new head the same way
    start = CrossEncoder.load("default", num_labels=1, device="cpu").predict(pairs)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    scores = CrossEncoder.load(out, device="cpu").predict(pairs)
    assert scores[0] - scores[1] > (start[0] - start[1]) + 0.08  # the similar pair moved up relative to the other
    log = [json.loads(line) for line in (tmp_path / "ce.train" / "log.jsonl").read_text().splitlines()]
    dev = [row for row in log if "dev" in row]
    assert dev and dev[-1]["primary"] == "spearman_score"


def test_nli_classification_training_then_a_new_head_for_sts(tmp_path):
    """Classification on NLI-style pairs learns the labels; loading it with num_labels=1 keeps the
    transformer and puts a fresh one-label head on it (the paper's NLI -> STSb route)."""
    from sbert.data.examples import LabeledPair
    from sbert.losses.cross_encoder import CrossEncoderClassificationLoss
    from sbert.training import Objective, TrainConfig, Trainer

    rows = [
        LabeledPair("A man plays a guitar.", "A man plays music.", 0),  # entailment
        LabeledPair("A man plays a guitar.", "A woman sings opera.", 1),  # neutral
        LabeledPair("A man plays a guitar.", "Nobody plays anything.", 2),  # contradiction
    ] * 6
    torch.manual_seed(0)
    model = CrossEncoder.load("default", num_labels=3, device="cpu")
    pairs = [(r.sentence1, r.sentence2) for r in rows[:3]]
    config = TrainConfig(epochs=4, batch_size=6, lr=1e-4, seed=0, progress=False)
    Trainer(model, [Objective(rows, CrossEncoderClassificationLoss(), "nli")], config, tmp_path / "nli").train()
    logits = model.predict(pairs)
    assert logits.shape == (3, 3) and logits.argmax(axis=1).tolist() == [0, 1, 2]

    sts = CrossEncoder.load(tmp_path / "nli", num_labels=1, device="cpu")
    assert sts.num_labels == 1 and sts.activation == "sigmoid"
    body = {k: v for k, v in model.model.state_dict().items() if "classifier" not in k}
    for name, value in sts.model.state_dict().items():
        if "classifier" not in name:
            assert torch.equal(value, body[name]), name
    assert sts.predict(pairs).shape == (3,)


def test_damaged_poisoned_or_linked_out_folders_are_refused(tmp_path):
    import shutil

    from test_remote_code import tiny_cross_encoder_folder

    from sbert.errors import ModelFormatError

    folder = tiny_cross_encoder_folder(tmp_path / "ce")
    good = CrossEncoder.load(folder, device="cpu")
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:1000])
    with pytest.raises(ModelFormatError, match=r"ce/model.safetensors: damaged weights file .* truncated"):
        CrossEncoder.load(folder, device="cpu")
    weights.write_bytes(data)
    from safetensors.torch import load_file, save_file

    from sbert.atomic import NonFiniteWeightsError

    with torch.no_grad():
        good.model.classifier.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteWeightsError, match=r"nan: refusing to save a model whose weights hold 1 NaN"):
        good.save(tmp_path / "nan")
    with torch.no_grad():
        good.model.classifier.weight[0, 0] = 0.0
    good.save(tmp_path / "nan")  # then its file poisoned, as a damaged copy would be
    poisoned = load_file(tmp_path / "nan" / "model.safetensors")
    poisoned["classifier.weight"][0, 0] = float("nan")
    save_file(poisoned, tmp_path / "nan" / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelFormatError, match=r"nan/model.safetensors: weight 'classifier.weight' holds 1 NaN"):
        CrossEncoder.load(tmp_path / "nan", device="cpu")
    outside = tmp_path / "outside.safetensors"
    shutil.move(weights, outside)
    weights.symlink_to(outside)
    with pytest.raises(ModelFormatError, match=r"ce/model.safetensors: a symbolic link to .*outside the model folder"):
        CrossEncoder.load(folder, device="cpu")
