"""Pair classification: is this pair a duplicate? (sentence-transformers' ``BinaryClassificationEvaluator``.)

For each similarity (cosine, dot, euclidean, manhattan) the pairs are scored, and the threshold that
answers yes/no best is found: the best accuracy and its threshold, the best F1 with its precision,
recall and threshold, and the average precision of the scores. Distances (euclidean, manhattan) answer
yes at or below their threshold; similarities at or above. A threshold lies halfway between the two
scores it separates, as sentence-transformers puts it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sbert import similarity
from sbert.arrays import Array

SIMILARITIES = ("cosine", "dot", "euclidean", "manhattan")
DISTANCES = ("euclidean", "manhattan")

Scores = Array | Sequence[float]  # one score per pair


def _sorted_rows(scores: Scores, labels: Sequence[int], higher_is_similar: bool) -> list[tuple[float, int]]:
    if len(scores) != len(labels) or not len(scores):
        raise ValueError(f"expected as many labels as scores (at least one), got {len(scores)} and {len(labels)}")
    if any(label not in (0, 1) for label in labels):
        raise ValueError("labels must be 1 (duplicate) or 0 (not a duplicate)")
    return sorted(
        zip((float(s) for s in scores), (int(x) for x in labels), strict=True),
        key=lambda r: r[0],
        reverse=higher_is_similar,
    )


def _between(rows: list[tuple[float, int]], i: int) -> float:
    """The threshold after row ``i``: halfway to the next score (the score itself at the end)."""
    if i == len(rows) - 1:
        return rows[i][0]
    middle = (rows[i][0] + rows[i + 1][0]) / 2
    return rows[i][0] if middle == rows[i + 1][0] else middle


def best_accuracy(scores: Scores, labels: Sequence[int], higher_is_similar: bool = True) -> tuple[float, float]:
    """(accuracy, threshold): the share of pairs answered right by the best threshold."""
    rows = _sorted_rows(scores, labels, higher_is_similar)
    negatives_left = sum(1 for _, label in rows if label == 0)
    best = negatives_left / len(rows)  # every pair answered no
    threshold = float(np.nextafter(rows[0][0], np.inf if higher_is_similar else -np.inf))
    positives = 0
    for i, (score, label) in enumerate(rows):
        positives += label
        negatives_left -= 1 - label
        if i < len(rows) - 1 and score == rows[i + 1][0]:
            continue
        accuracy = (positives + negatives_left) / len(rows)
        if accuracy > best:
            best, threshold = accuracy, _between(rows, i)
    return best, threshold


def best_f1(scores: Scores, labels: Sequence[int], higher_is_similar: bool = True) -> tuple[float, float, float, float]:
    """(F1, precision, recall, threshold) of the threshold with the best F1 (all 0 without duplicates)."""
    rows = _sorted_rows(scores, labels, higher_is_similar)
    total = sum(label for _, label in rows)
    best = (0.0, 0.0, 0.0, 0.0)
    correct = 0
    for i, (score, label) in enumerate(rows):
        correct += label
        if (i < len(rows) - 1 and score == rows[i + 1][0]) or not correct:
            continue
        precision, recall = correct / (i + 1), correct / total
        f1 = 2 * precision * recall / (precision + recall)
        if f1 > best[0]:
            best = (f1, precision, recall, _between(rows, i))
    return best


def average_precision(scores: Scores, labels: Sequence[int], higher_is_similar: bool = True) -> float:
    """Average precision of the ranking by score (scikit-learn's, ties counted together); 0 without
    duplicates. Only the order counts, so infinite scores rank as any other."""
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score

    if not any(labels):
        return 0.0
    sign = 1.0 if higher_is_similar else -1.0
    return float(average_precision_score(np.asarray(labels), rankdata(sign * np.asarray(scores, dtype=np.float64))))


def pair_scores(a: np.ndarray, b: np.ndarray, name: str) -> tuple[Array, bool]:
    """(scores of each (a[i], b[i]), whether higher means more similar): distances for euclidean/manhattan."""
    if name not in SIMILARITIES:
        raise ValueError(f"similarity {name!r}: expected one of {', '.join(SIMILARITIES)}")
    scores = similarity.PAIRWISE[name](a, b)  # higher = closer
    return (-scores, False) if name in DISTANCES else (scores, True)


def classification_metrics(scores: Scores, labels: Sequence[int], higher_is_similar: bool = True) -> dict:
    """accuracy, accuracy_threshold, f1, precision, recall, f1_threshold, ap (shares, not x 100)."""
    accuracy, accuracy_threshold = best_accuracy(scores, labels, higher_is_similar)
    f1, precision, recall, f1_threshold = best_f1(scores, labels, higher_is_similar)
    return {
        "accuracy": accuracy,
        "accuracy_threshold": accuracy_threshold,
        "f1": f1,
        "precision": precision,
        "recall": recall,
        "f1_threshold": f1_threshold,
        "ap": average_precision(scores, labels, higher_is_similar),
    }


class PairClassificationEvaluator:
    """Duplicate / not-duplicate pairs: ``{similarity}_{metric}`` for each similarity; headline: the
    average precision of the model's own similarity (cosine where it names none)."""

    def __init__(
        self,
        pairs: Sequence[tuple[str, str]],
        labels: Sequence[int],
        name: str = "pairs",
        batch_size: int = 32,
        similarities: Sequence[str] = SIMILARITIES,
    ) -> None:
        if len(pairs) != len(labels) or not pairs:
            raise ValueError(f"{name}: expected one label per pair (at least one), got {len(pairs)} and {len(labels)}")
        _sorted_rows([0.0] * len(labels), labels, True)  # labels 0/1, refused now
        unknown = [s for s in similarities if s not in SIMILARITIES]
        if unknown:
            raise ValueError(f"similarity {unknown[0]!r}: expected one of {', '.join(SIMILARITIES)}")
        self.pairs, self.labels, self.name = list(pairs), [int(x) for x in labels], name
        self.batch_size, self.similarities = batch_size, tuple(similarities)

    def primary_metric(self, model) -> str:
        own = getattr(model, "similarity_fn_name", None) or "cosine"
        return f"{own if own in self.similarities else self.similarities[0]}_ap"

    def __call__(self, model, show_progress: bool | None = None) -> dict[str, float]:
        texts = list(dict.fromkeys(t for pair in self.pairs for t in pair))
        index = {t: i for i, t in enumerate(texts)}
        vectors = model.encode(texts, batch_size=self.batch_size, show_progress=show_progress)
        a = vectors[[index[p[0]] for p in self.pairs]]
        b = vectors[[index[p[1]] for p in self.pairs]]
        metrics = {}
        for name in self.similarities:
            scores, higher = pair_scores(a, b, name)
            for key, value in classification_metrics(scores, self.labels, higher).items():
                metrics[f"{name}_{key}"] = float(value)
        return metrics
