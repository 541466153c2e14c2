"""STS evaluation: Spearman and Pearson correlation (x 100) between gold scores and similarities."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr

from sbert import similarity
from sbert.data.examples import ScoredPair
from sbert.evaluation.pair_classification import Scores


def correlations(gold: Scores, predicted: Scores) -> tuple[float, float]:
    """(Spearman, Pearson) x 100 of ``predicted`` against ``gold`` (lists or arrays)."""
    gold, predicted = np.asarray(gold, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if len(gold) != len(predicted) or len(gold) < 2:
        raise ValueError(f"need two equally long score lists of 2 or more, got {len(gold)} and {len(predicted)}")
    return 100 * float(spearmanr(gold, predicted)[0]), 100 * float(pearsonr(gold, predicted)[0])


def embed_pairs(encoder, pairs: Sequence, batch_size: int = 32, **encode_kwargs) -> tuple[np.ndarray, ...]:
    """Embed each distinct sentence of ``pairs`` once; return (first sentences, second sentences)."""
    firsts, seconds = [p.sentence1 for p in pairs], [p.sentence2 for p in pairs]
    unique = list(dict.fromkeys(firsts + seconds))
    index = {s: i for i, s in enumerate(unique)}
    vectors = encoder.encode(unique, batch_size=batch_size, allow_empty=True, **encode_kwargs)
    return vectors[[index[s] for s in firsts]], vectors[[index[s] for s in seconds]]


def is_cross_encoder(model) -> bool:
    """A model that scores pairs (``predict``) instead of embedding sentences (``encode``)."""
    return hasattr(model, "predict") and not hasattr(model, "encode")


def cross_encoder_metrics(
    model, pairs: Sequence[ScoredPair], batch_size: int, show_progress: bool | None = None
) -> dict[str, float]:
    """Spearman / Pearson x 100 of a one-label cross-encoder's scores against the gold scores."""
    scores = model.predict(
        [(p.sentence1, p.sentence2) for p in pairs], batch_size=batch_size, show_progress=show_progress
    )
    if scores.ndim != 1:
        raise ValueError(f"STS evaluation needs a one-label cross-encoder; this one gives {scores.shape[1]} scores")
    spearman, pearson = correlations([p.score for p in pairs], scores)
    return {"spearman_score": spearman, "pearson_score": pearson}


class STSEvaluator:
    """Correlation of cosine, euclidean, manhattan and dot similarity with gold scores.

    ``show_progress`` (when called): a bar while embedding; None leaves it to ``encode`` (a terminal,
    long inputs).
    """

    def __init__(self, pairs: Sequence[ScoredPair], name: str = "sts", batch_size: int = 32) -> None:
        if len(pairs) < 2:
            raise ValueError(f"{name}: an STS evaluation needs at least 2 scored pairs, got {len(pairs)}")
        self.pairs, self.name, self.batch_size = list(pairs), name, batch_size

    def primary_metric(self, model) -> str:
        """Spearman of cosine; of the scores, for a cross-encoder (it has no vectors to take the cosine of)."""
        return "spearman_score" if is_cross_encoder(model) else "spearman_cosine"

    def __call__(self, encoder, show_progress: bool | None = None) -> dict[str, float]:
        gold = [p.score for p in self.pairs]
        if is_cross_encoder(encoder):
            return cross_encoder_metrics(encoder, self.pairs, self.batch_size, show_progress)
        u, v = embed_pairs(encoder, self.pairs, self.batch_size, on_truncation="ignore", show_progress=show_progress)
        metrics: dict[str, float] = {}
        for name, fn in similarity.PAIRWISE.items():
            spearman, pearson = correlations(gold, fn(u, v))
            metrics[f"spearman_{name}"], metrics[f"pearson_{name}"] = spearman, pearson
        return metrics


class STSSubsetsEvaluator:
    """One SemEval STS year: Spearman/Pearson per subset, and over all subsets in two ways.

    ``all_pooled``: one correlation over every pair of the year concatenated (what the SBERT paper's
    STS12-16 numbers are). ``all_mean``: the unweighted mean of the subsets' correlations (what
    SentEval reports as "all"). ``all_wmean``: the mean weighted by subset size.
    """

    def __init__(self, subsets: dict[str, list[ScoredPair]], name: str = "sts", batch_size: int = 32) -> None:
        if not subsets:
            raise ValueError(f"{name}: no subsets")
        self.subsets, self.name, self.batch_size = subsets, name, batch_size

    def primary_metric(self, model) -> str:
        """Spearman over all pairs of the year pooled (the paper's number), of cosine or of a cross-encoder's scores."""
        return "all_pooled/spearman_" + ("score" if is_cross_encoder(model) else "cosine")

    def __call__(self, encoder, show_progress: bool | None = None) -> dict[str, float]:
        pairs = [p for subset in self.subsets.values() for p in subset]
        if is_cross_encoder(encoder):
            scored = cross_encoder_metrics(encoder, pairs, self.batch_size, show_progress)
            return {f"all_pooled/{k}": v for k, v in scored.items()}
        u, v = embed_pairs(encoder, pairs, self.batch_size, on_truncation="ignore", show_progress=show_progress)
        metrics: dict[str, float] = {}
        for fn_name, fn in similarity.PAIRWISE.items():
            predicted, start, per_subset, sizes = fn(u, v), 0, [], []
            for subset, subset_pairs in self.subsets.items():
                end = start + len(subset_pairs)
                spearman, pearson = correlations([p.score for p in subset_pairs], predicted[start:end])
                metrics[f"{subset}/spearman_{fn_name}"], metrics[f"{subset}/pearson_{fn_name}"] = (
                    spearman,
                    pearson,
                )
                per_subset.append((spearman, pearson))
                sizes.append(len(subset_pairs))
                start = end
            spearman, pearson = correlations([p.score for p in pairs], predicted)
            metrics[f"all_pooled/spearman_{fn_name}"], metrics[f"all_pooled/pearson_{fn_name}"] = (
                spearman,
                pearson,
            )
            per_subset_arr = np.asarray(per_subset)
            metrics[f"all_mean/spearman_{fn_name}"] = float(per_subset_arr[:, 0].mean())
            metrics[f"all_mean/pearson_{fn_name}"] = float(per_subset_arr[:, 1].mean())
            metrics[f"all_wmean/spearman_{fn_name}"] = float(np.average(per_subset_arr[:, 0], weights=sizes))
            metrics[f"all_wmean/pearson_{fn_name}"] = float(np.average(per_subset_arr[:, 1], weights=sizes))
        return metrics
