"""SentEval transfer protocol: logistic regression (scikit-learn) on frozen sentence embeddings.

- MR, CR, SUBJ, MPQA: 10-fold stratified cross-validation; in each outer fold the regularisation is
  chosen by an inner cross-validation on that fold's training part only.
- SST-2: regularisation chosen on the dev split, accuracy on test.
- TREC, MRPC: regularisation chosen by cross-validation on train, accuracy (and MRPC's F1) on test.
  MRPC's features are (u, v, |u-v|, u*v).

SentEval's grid of inverse regularisation strengths is 2^-2 .. 2^3. Its inner cross-validation has
10 folds; sbert defaults to 5 to fit a 2-core machine (``inner_folds``), which it states beside results.

A task takes a minute or more on a CPU: the evaluator shows a bar over the outer folds (or the
regularisation grid) on standard error when it is a terminal, or when asked (``show_progress=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from sbert.data.transfer import TransferTask
from sbert.progress import progress_bar

GRID = tuple(2.0**t for t in range(-2, 4))
SEED = 1111  # SentEval's


def _logreg(C: float, seed: int):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=2000, random_state=seed)


def fold_indices(labels: np.ndarray, folds: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Stratified, shuffled (train rows, test rows) pairs; each row is in exactly one test fold."""
    from sklearn.model_selection import StratifiedKFold

    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    yield from splitter.split(np.zeros(len(labels)), labels)


def choose_c(
    x: np.ndarray,
    y: np.ndarray,
    folds: int,
    seed: int,
    fit: Callable = _logreg,
    on_value: Callable[[], object] | None = None,
) -> float:
    """The grid value with the best mean accuracy over an inner cross-validation of (x, y).

    ``on_value`` is called after each grid value (progress)."""
    scores = []
    for C in GRID:
        accs = [fit(C, seed).fit(x[tr], y[tr]).score(x[te], y[te]) for tr, te in fold_indices(y, folds, seed)]
        scores.append(np.mean(accs))
        if on_value is not None:
            on_value()
    return GRID[int(np.argmax(scores))]


def cross_validated_accuracy(
    x: np.ndarray,
    y: np.ndarray,
    folds: int = 10,
    inner_folds: int = 5,
    seed: int = SEED,
    fit: Callable = _logreg,
    on_fold: Callable[[], object] | None = None,
) -> float:
    """Mean test accuracy x 100 over ``folds`` outer folds, C chosen inside each training part.

    ``on_fold`` is called after each outer fold (progress)."""
    accs = []
    for train, test in fold_indices(y, folds, seed):
        C = choose_c(x[train], y[train], inner_folds, seed, fit)
        accs.append(fit(C, seed).fit(x[train], y[train]).score(x[test], y[test]))
        if on_fold is not None:
            on_fold()
    return 100 * float(np.mean(accs))


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(u, v, |u-v|, u*v), as for MRPC."""
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


class TransferEvaluator:
    """Accuracy x 100 (and F1 x 100 for MRPC) of a logistic regression on the encoder's embeddings."""

    def __init__(self, task: TransferTask, batch_size: int = 32, inner_folds: int = 5, seed: int = SEED):
        self.task, self.batch_size, self.inner_folds, self.seed = task, batch_size, inner_folds, seed
        self.name = task.name

    def primary_metric(self, model) -> str:
        """Test accuracy (MRPC's F1 is reported beside it)."""
        return "accuracy"

    def _features(self, encoder, texts: list, show_progress: bool | None) -> np.ndarray:
        kwargs = {"batch_size": self.batch_size, "on_truncation": "ignore", "show_progress": show_progress}
        if texts and isinstance(texts[0], tuple):
            u = encoder.encode([a for a, _ in texts], **kwargs)
            v = encoder.encode([b for _, b in texts], **kwargs)
            return pair_features(u, v)
        return encoder.encode(texts, **kwargs)

    def __call__(self, encoder, show_progress: bool | None = None) -> dict[str, float]:
        """Embed the task's texts, then fit and score; ``show_progress`` None: bars on a terminal."""
        splits = self.task.splits
        data = {
            name: (self._features(encoder, s.texts, show_progress), np.asarray(s.labels)) for name, s in splits.items()
        }
        if "all" in data:
            x, y = data["all"]
            with progress_bar(10, f"{self.name}: 10-fold CV", show_progress, unit="fold") as bar:
                return {"accuracy": cross_validated_accuracy(x, y, 10, self.inner_folds, self.seed, on_fold=bar.update)}
        (xtr, ytr), (xte, yte) = data["train"], data["test"]
        with progress_bar(len(GRID) + 1, f"{self.name}: choosing C", show_progress, unit="fit") as bar:
            if "dev" in data:
                xdev, ydev = data["dev"]
                scores = []
                for C in GRID:
                    scores.append(_logreg(C, self.seed).fit(xtr, ytr).score(xdev, ydev))
                    bar.update()
                C = GRID[int(np.argmax(scores))]
            else:
                C = choose_c(xtr, ytr, self.inner_folds, self.seed, on_value=bar.update)
            model = _logreg(C, self.seed).fit(xtr, ytr)
            bar.update()
        metrics = {"accuracy": 100 * float(model.score(xte, yte))}
        if self.task.num_classes == 2 and self.task.name == "MRPC":
            from sklearn.metrics import f1_score

            metrics["f1"] = 100 * float(f1_score(yte, model.predict(xte)))
        return metrics
