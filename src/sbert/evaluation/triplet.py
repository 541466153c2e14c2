"""Triplet accuracy: the share of triplets whose anchor is closer to the positive than to the negative."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sbert import similarity
from sbert.data.examples import Triplet


class TripletEvaluator:
    """Accuracy (x 100) under euclidean (the paper's), cosine and manhattan distance."""

    def __init__(self, triplets: Sequence[Triplet], name: str = "triplets", batch_size: int = 32) -> None:
        if not triplets:
            raise ValueError(f"{name}: a triplet evaluation needs at least one triplet")
        self.triplets, self.name, self.batch_size = list(triplets), name, batch_size

    def primary_metric(self, model) -> str:
        """Accuracy under the euclidean distance, the paper's."""
        return "accuracy_euclidean"

    def __call__(self, encoder, show_progress: bool | None = None) -> dict[str, float]:
        texts = list(dict.fromkeys(s for t in self.triplets for s in (t.anchor, t.positive, t.negative)))
        index = {s: i for i, s in enumerate(texts)}
        vectors = encoder.encode(texts, batch_size=self.batch_size, on_truncation="ignore", show_progress=show_progress)

        def rows(field: str) -> np.ndarray:
            return vectors[[index[getattr(t, field)] for t in self.triplets]]

        a, p, n = rows("anchor"), rows("positive"), rows("negative")
        metrics = {}
        for name in ("euclidean", "cosine", "manhattan"):
            fn = similarity.PAIRWISE[name]  # higher = closer
            metrics[f"accuracy_{name}"] = 100 * float(np.mean(fn(a, p) > fn(a, n)))
        return metrics
