"""Evaluators against hand-computed values, SentEval's fold logic, baselines and ``sbert eval``."""

from __future__ import annotations

import gzip
import json
import re
from typing import ClassVar

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.cli import main
from sbert.data.examples import ScoredPair, Triplet
from sbert.data.transfer import read_transfer_task
from sbert.errors import InputFileError
from sbert.evaluation import STSEvaluator, TripletEvaluator
from sbert.evaluation.baselines import WordVectorAverage
from sbert.evaluation.sts import STSSubsetsEvaluator, correlations
from sbert.evaluation.tasks import expand, task_evaluator
from sbert.evaluation.transfer import choose_c, cross_validated_accuracy, fold_indices, pair_features


class TableEncoder:
    """Each text's vector given up front, with Encoder.encode's calling convention."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts, **_):
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def test_spearman_and_pearson_by_hand():
    # gold 1,2,3,4 against 1,3,2,4: ranks differ in one swap -> rho = 1 - 6*2/(4*15) = 0.8
    spearman, pearson = correlations([1, 2, 3, 4], [1, 3, 2, 4])
    assert spearman == pytest.approx(80.0)
    assert pearson == pytest.approx(80.0)  # equal-spaced values: Pearson equals Spearman here
    spearman, pearson = correlations([1, 2, 3], [1, 2, 10])
    assert spearman == pytest.approx(100.0)
    x, y = np.array([1, 2, 3.0]), np.array([1, 2, 10.0])
    expected = ((x - x.mean()) * (y - y.mean())).sum() / np.sqrt(
        ((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum()
    )
    assert pearson == pytest.approx(100 * expected)


def test_sts_evaluator_uses_cosine_of_each_pair():
    enc = TableEncoder({"a": [1, 0], "b": [1, 0.1], "c": [0, 1], "d": [1, 1]})
    pairs = [ScoredPair("a", "b", 5.0), ScoredPair("a", "c", 0.0), ScoredPair("a", "d", 3.0)]
    metrics = STSEvaluator(pairs)(enc)
    assert metrics["spearman_cosine"] == pytest.approx(100.0)
    assert set(metrics) >= {"pearson_cosine", "spearman_euclidean", "spearman_manhattan", "spearman_dot"}


def test_sts_subsets_pooled_differs_from_mean():
    enc = TableEncoder({"a": [1, 0], "b": [1, 0.1], "c": [0, 1], "d": [1, 1], "e": [1.5, 0.6]})
    subsets = {  # each subset ranked right on its own, but the two disagree on the scale
        "one": [ScoredPair("a", "b", 3.0), ScoredPair("a", "c", 0.0)],
        "two": [ScoredPair("a", "d", 4.0), ScoredPair("a", "e", 5.0)],
    }
    m = STSSubsetsEvaluator(subsets)(enc)
    assert m["one/spearman_cosine"] == pytest.approx(100.0)
    assert m["two/spearman_cosine"] == pytest.approx(100.0)  # cos(a,e) > cos(a,d): ranks agree
    assert m["all_mean/spearman_cosine"] == pytest.approx(100.0)
    cos = {"b": 1 / np.sqrt(1.01), "c": 0.0, "d": 1 / np.sqrt(2), "e": 1.5 / np.sqrt(2.61)}
    expected, _ = correlations([3, 0, 4, 5], [cos["b"], cos["c"], cos["d"], cos["e"]])
    assert m["all_pooled/spearman_cosine"] == pytest.approx(expected)
    assert expected < 100.0


def test_triplet_accuracy_by_hand():
    enc = TableEncoder({"a": [0, 0], "p": [1, 0], "n": [3, 0], "far": [5, 0], "q": [0, 2], "m": [0, -1]})
    triplets = [Triplet("a", "p", "n"), Triplet("a", "far", "n"), Triplet("a", "q", "m")]
    m = TripletEvaluator(triplets)(enc)
    # euclidean: 1<3 yes; 5<3 no; 2<1 no -> 1/3
    assert m["accuracy_euclidean"] == pytest.approx(100 / 3)
    # manhattan is the same on these axis-aligned points
    assert m["accuracy_manhattan"] == pytest.approx(100 / 3)


def test_senteval_folds_never_train_on_their_test_rows():
    labels = np.array([0, 1] * 25)
    seen = []
    for train, test in fold_indices(labels, 10, 1111):
        assert not set(train) & set(test)
        seen.extend(test)
    assert sorted(seen) == list(range(50))  # every row is tested exactly once

    x = np.arange(50, dtype=float)[:, None]  # each row's feature is its own index

    class Recorder:
        fits: ClassVar[list[set]] = []

        def __init__(self, C, seed):
            pass

        def fit(self, xs, ys):
            Recorder.fits.append({int(v) for v in xs[:, 0]})
            return self

        def score(self, xs, ys):
            return 0.5

    cross_validated_accuracy(x, labels, folds=5, inner_folds=3, seed=1, fit=Recorder)
    outer = list(fold_indices(labels, 5, 1))
    per_fold = len(Recorder.fits) // 5  # 6 grid values x 3 inner folds + 1 final fit
    for k, (_, test) in enumerate(outer):
        for rows in Recorder.fits[k * per_fold : (k + 1) * per_fold]:
            assert not rows & set(test.tolist())


@pytest.mark.slow
def test_choose_c_and_cross_validation_on_separable_data():
    rng = np.random.default_rng(0)
    y = np.array([0, 1] * 40)
    x = rng.normal(size=(80, 3)) + y[:, None] * 4.0
    assert choose_c(x, y, 3, 0) in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    assert cross_validated_accuracy(x, y, folds=4, inner_folds=3) == pytest.approx(100.0)


def test_pair_features_order():
    u, v = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
    np.testing.assert_array_equal(pair_features(u, v), [[1, 2, 3, -1, 2, 3, 3, -2]])


def test_word_vector_average():
    avg = WordVectorAverage(["the", "cat", "'s", "."], np.array([[1, 0], [0, 1], [2, 2], [4, 4]], dtype=np.float32))
    np.testing.assert_allclose(avg.encode(["The cat's."]), [[(1 + 0 + 2 + 4) / 4, (0 + 1 + 2 + 4) / 4]])
    np.testing.assert_array_equal(avg.encode("unknown words"), [0, 0])


# -- transfer readers on fixtures ---------------------------------------------------------------------
def _gz(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as handle:
        handle.write(text.encode(encoding))


def test_transfer_readers(tmp_path):
    _gz(tmp_path / "MR" / "rt-polarity.pos.gz", "caf\xe9 good\n", encoding="latin-1")
    _gz(tmp_path / "MR" / "rt-polarity.neg.gz", "bad\n\n")
    task = read_transfer_task(tmp_path, "MR")
    assert task.splits["all"].texts == ["bad", "café good"] and task.splits["all"].labels == [0, 1]
    assert task.skipped_empty == 1
    _gz(tmp_path / "TREC" / "train_5500.label.gz", "DESC:manner How did it go ?\nNUM:date When ?\n")
    _gz(tmp_path / "TREC" / "TREC_10.label.gz", "LOC:other Where ?\n")
    trec = read_transfer_task(tmp_path, "TREC")
    assert trec.splits["train"].labels == [1, 5] and trec.splits["test"].texts == ["Where ?"]
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    _gz(tmp_path / "MRPC" / "msr_paraphrase_train.txt.gz", header + "1\t1\t2\tA b .\tA c .\n")
    _gz(tmp_path / "MRPC" / "msr_paraphrase_test.txt.gz", header + "0\t3\t4\tX\tY\n")
    mrpc = read_transfer_task(tmp_path, "MRPC")
    assert mrpc.splits["train"].texts == [("A b .", "A c .")] and mrpc.splits["test"].labels == [0]
    for split in ("train", "dev", "test"):
        _gz(tmp_path / "SST" / "binary" / f"sentiment-{split}.gz", "a fine film \t1\nawful \t0\n")
    assert read_transfer_task(tmp_path, "SST2").splits["dev"].labels == [1, 0]


def test_transfer_reader_errors(tmp_path):
    with pytest.raises(InputFileError, match=r"CR: CR folder not found"):
        read_transfer_task(tmp_path, "CR")
    _gz(tmp_path / "TREC" / "train_5500.label.gz", "WHAT:x Why ?\n")
    _gz(tmp_path / "TREC" / "TREC_10.label.gz", "")
    with pytest.raises(InputFileError, match=r"train_5500.label: line 1: class 'WHAT'"):
        read_transfer_task(tmp_path, "TREC")


# -- tasks and the eval command -------------------------------------------------------------------------
def test_task_names_expand_and_missing_folders_are_named(tmp_path):
    assert expand("stsb,senteval")[:3] == ["stsb", "mr", "cr"] and len(expand("sts,senteval")) == 14
    with pytest.raises(ValueError, match="unknown task 'sts17'"):
        expand("sts17")
    with pytest.raises(InputFileError, match=r"STS13-en-test: STS13 folder not found"):
        task_evaluator("sts13", tmp_path)


def test_eval_command_on_a_fixture_data_folder(tmp_path, model):
    rows = [
        ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
        ("A woman is slicing onions.", "A man is driving a car.", 0.2),
        ("Kids are playing soccer.", "Children play football.", 4.0),
        ("The cat sleeps.", "A stock market crashed.", 0.0),
    ]
    sts = tmp_path / "stsbenchmark"
    sts.mkdir()
    (sts / "sts-test.csv").write_text("".join(f"g\tf\t2012\t{i}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(rows)))
    out = tmp_path / "scores.json"
    result = CliRunner().invoke(main, ["eval", "--tasks", "stsb", "--data", str(tmp_path), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "stsb" in result.stdout and "spearman_cosine" in result.stdout
    saved = json.loads(out.read_text())["tasks"]["stsb"]
    assert saved["spearman_cosine"] == pytest.approx(100.0)  # the four pairs are ranked right
    result = CliRunner().invoke(main, ["eval", "--tasks", "sts12", "--data", str(tmp_path)])
    assert result.exit_code == 1 and "STS12 folder not found" in result.output


# -- progress: a SentEval task takes a minute or more; it shows its folds on a terminal or when asked -----------
def _tiny_transfer_tasks():
    from sbert.data.transfer import Split, TransferTask

    texts = [f"t{i}" for i in range(40)]
    labels = [i % 2 for i in range(40)]
    cv = TransferTask("MR", {"all": Split(texts, labels)}, 2)
    split = TransferTask("SST2", {s: Split(texts, labels) for s in ("train", "dev", "test")}, 2)
    encoder = TableEncoder({t: [float(i % 2), float(i) / 40] for i, t in enumerate(texts)})
    return cv, split, encoder


@pytest.mark.slow
def test_transfer_evaluation_shows_its_folds_when_asked(capsys, monkeypatch):
    from sbert.evaluation.transfer import TransferEvaluator

    cv, split, encoder = _tiny_transfer_tasks()
    TransferEvaluator(cv, inner_folds=2)(encoder, show_progress=True)
    err = capsys.readouterr().err  # pytest's standard error is not a terminal: plain lines, not a bar
    assert "MR: 10-fold CV: 10/10 folds in" in err
    TransferEvaluator(split, inner_folds=2)(encoder, show_progress=True)
    assert re.search(r"SST2: choosing C: (\d+)/\1 fits in", capsys.readouterr().err)
    monkeypatch.setenv("SBERT_PROGRESS_INTERVAL", "3600")  # None: off a terminal, a line at this pace at most
    for quiet in (False, None):
        TransferEvaluator(cv, inner_folds=2)(encoder, show_progress=quiet)
        assert capsys.readouterr().err == ""


# -- evaluators name their headline metric ----------------------------------------------------------------------
class TableScorer:
    """A one-label cross-encoder stand-in: each pair's score given up front."""

    num_labels = 1

    def __init__(self, scores: dict[tuple[str, str], float]) -> None:
        self.scores = scores

    def predict(self, pairs, batch_size=32, show_progress=None):
        return np.array([self.scores[tuple(p)] for p in pairs], dtype=np.float32)


def test_each_evaluator_names_its_headline_metric_for_the_model_it_scores():
    from sbert.evaluation import Evaluator
    from sbert.evaluation.transfer import TransferEvaluator

    enc = TableEncoder({"a": [1, 0], "b": [1, 0.1], "c": [0, 1], "d": [1, 1]})
    pairs = [ScoredPair("a", "b", 5.0), ScoredPair("a", "c", 0.0), ScoredPair("a", "d", 3.0)]
    cross = TableScorer({("a", "b"): 0.9, ("a", "c"): 0.1, ("a", "d"): 0.5})
    cv, _, transfer_encoder = _tiny_transfer_tasks()
    cases = [
        (STSEvaluator(pairs), enc, "spearman_cosine"),
        (STSEvaluator(pairs), cross, "spearman_score"),
        (STSSubsetsEvaluator({"x": pairs}), enc, "all_pooled/spearman_cosine"),
        (STSSubsetsEvaluator({"x": pairs}), cross, "all_pooled/spearman_score"),
        (TripletEvaluator([Triplet("a", "b", "c")]), enc, "accuracy_euclidean"),
        (TransferEvaluator(cv, inner_folds=2), transfer_encoder, "accuracy"),
    ]
    for evaluator, model, key in cases:
        assert isinstance(evaluator, Evaluator)
        assert evaluator.primary_metric(model) == key
        assert key in evaluator(model, show_progress=False), key
    assert STSEvaluator(pairs)(cross)["spearman_score"] == pytest.approx(100.0)


def test_dev_evaluator_of_each_training_format(tmp_path):
    from sbert.evaluation.dev import dev_evaluator

    (tmp_path / "nli.jsonl").write_text(
        "".join(
            json.dumps({"sentence1": "p", "sentence2": h, "gold_label": g}) + "\n"
            for h, g in (("e", "entailment"), ("c", "contradiction"))
        )
    )
    (tmp_path / "sts.csv").write_text("g\tf\t2012\t1\t4.0\ta\tb\ng\tf\t2012\t2\t1.0\ta\tc\n")
    triplets = dev_evaluator("nli", tmp_path / "nli.jsonl")
    assert isinstance(triplets, TripletEvaluator) and triplets.triplets == [Triplet("p", "e", "c")]
    scored = dev_evaluator("stsb", tmp_path / "sts.csv", cross_encoder=True)
    assert isinstance(scored, STSEvaluator) and scored.name == "sts.csv"
    with pytest.raises(ValueError, match=r"dev format 'nli': gives nothing a dev evaluation reads; expected one of"):
        dev_evaluator("nli", tmp_path / "nli.jsonl", cross_encoder=True)
