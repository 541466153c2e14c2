"""The default model's published STSb score, and agreement with sentence-transformers' evaluator."""

from __future__ import annotations

import pytest

from sbert.data.paths import data_dir
from sbert.errors import InputFileError
from sbert.evaluation.tasks import task_evaluator

pytestmark = pytest.mark.slow  # scores the default model against sentence-transformers

st = pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def folder():
    try:
        return data_dir()
    except InputFileError as err:
        pytest.skip(str(err))


def reference_spearman(reference, pairs) -> float:
    try:
        from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator
    evaluator = EmbeddingSimilarityEvaluator(
        [p.sentence1 for p in pairs], [p.sentence2 for p in pairs], [p.score for p in pairs], name="ref"
    )
    scores = evaluator(reference)
    return 100 * scores["ref_spearman_cosine"]


def test_default_model_scores_its_published_stsb_value(model, folder):
    score = task_evaluator("stsb", folder)(model)["spearman_cosine"]
    assert score == pytest.approx(82.03, abs=0.05)


def _sample(pairs: list, n: int) -> list:
    """A seeded sample of ``n`` pairs in their order (all when fewer): the comparison is as strict on a sample,
    and the whole sets took ~50 s a task to embed twice on 2 cores."""
    import random

    keep = sorted(random.Random(0).sample(range(len(pairs)), min(n, len(pairs))))
    return [pairs[i] for i in keep]


@pytest.mark.parametrize("task", ["sick-r", "sts12"])
def test_same_score_as_sentence_transformers_evaluator(model, reference, folder, task):
    evaluator = task_evaluator(task, folder)  # the whole task read and parsed; a sample of its pairs scored
    if task == "sick-r":
        assert len(evaluator.pairs) == 4927
        evaluator.pairs = _sample(evaluator.pairs, 800)
    else:
        assert sum(len(s) for s in evaluator.subsets.values()) == 3108 and len(evaluator.subsets) == 5
        evaluator.subsets = {name: _sample(subset, 160) for name, subset in evaluator.subsets.items()}
    pairs = evaluator.pairs if task == "sick-r" else [p for s in evaluator.subsets.values() for p in s]
    ours = evaluator(model)
    ours = ours["spearman_cosine"] if task == "sick-r" else ours["all_pooled/spearman_cosine"]
    assert ours == pytest.approx(reference_spearman(reference, pairs), abs=0.01)
