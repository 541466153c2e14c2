"""STS evaluation: Spearman and Pearson correlation (x 100) between gold scores and similarities."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr

from sbert import similarity
from sbert.data.examples import ScoredPair


def correlations(gold: Sequence[float], predicted: Sequence[float]) -> tuple[float, float]:
    """(Spearman, Pearson) x 100 of ``predicted`` against ``gold``."""
    gold, predicted = np.asarray(gold, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if len(gold) != len(predicted) or len(gold) < 2:
        raise ValueError(
            f"need two equally long score lists of 2 or more, got {len(gold)} and {len(predicted)}"
        )
    return 100 * float(spearmanr(gold, predicted)[0]), 100 * float(pearsonr(gold, predicted)[0])


def embed_pairs(encoder, pairs: Sequence, batch_size: int = 32, **encode_kwargs) -> tuple[np.ndarray, ...]:
    """Embed each distinct sentence of ``pairs`` once; return (first sentences, second sentences)."""
    firsts, seconds = [p.sentence1 for p in pairs], [p.sentence2 for p in pairs]
    unique = list(dict.fromkeys(firsts + seconds))
    index = {s: i for i, s in enumerate(unique)}
    vectors = encoder.encode(unique, batch_size=batch_size, allow_empty=True, **encode_kwargs)
    return vectors[[index[s] for s in firsts]], vectors[[index[s] for s in seconds]]


class STSEvaluator:
    """Correlation of cosine, euclidean, manhattan and dot similarity with gold scores."""

    primary = "spearman_cosine"

    def __init__(self, pairs: Sequence[ScoredPair], name: str = "sts", batch_size: int = 32) -> None:
        if len(pairs) < 2:
            raise ValueError(f"{name}: an STS evaluation needs at least 2 scored pairs, got {len(pairs)}")
        self.pairs, self.name, self.batch_size = list(pairs), name, batch_size

    def __call__(self, encoder) -> dict[str, float]:
        u, v = embed_pairs(encoder, self.pairs, self.batch_size, on_truncation="ignore")
        gold = [p.score for p in self.pairs]
        metrics: dict[str, float] = {}
        for name, fn in similarity.PAIRWISE.items():
            spearman, pearson = correlations(gold, fn(u, v))
            metrics[f"spearman_{name}"], metrics[f"pearson_{name}"] = spearman, pearson
        return metrics
