"""Clustering sentence embeddings: agglomerative (threshold), k-means, and fast community detection.

Every method returns ``labels``: an (n,) int64 array where clusters are numbered by size, largest
first (ties: by smallest member), and -1 marks rows in no cluster. ``clusters(labels)`` lists them.
Thresholds are cosine similarities (higher = stricter) for every method.
"""

from __future__ import annotations

import numpy as np
import torch

from sbert.arrays import Array, as_tensor


def _unit(embeddings: Array) -> np.ndarray:
    x = as_tensor(embeddings).float().cpu()
    return torch.nn.functional.normalize(x, dim=1).numpy()


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Cluster ids by size descending, then by first member; -1 stays -1."""
    out = np.full(len(labels), -1, dtype=np.int64)
    ids = [c for c in np.unique(labels) if c >= 0]
    members = {c: np.flatnonzero(labels == c) for c in ids}
    for new, c in enumerate(sorted(ids, key=lambda c: (-len(members[c]), members[c][0]))):
        out[members[c]] = new
    return out


def clusters(labels: np.ndarray) -> list[list[int]]:
    """Row numbers of each cluster, in label order (largest first for this module's labels)."""
    labels = np.asarray(labels)
    return [np.flatnonzero(labels == c).tolist() for c in range(int(labels.max(initial=-1)) + 1)]


def agglomerative(embeddings: Array, threshold: float = 0.5, linkage: str = "average") -> np.ndarray:
    """Hierarchical clustering on cosine distance, merging while the linked similarity is >= ``threshold``.

    ``linkage``: average, complete or single. Holds the (n, n) distances, so keep n to tens of thousands.
    """
    from sklearn.cluster import AgglomerativeClustering

    x = _unit(embeddings)
    if len(x) < 2:
        return np.zeros(len(x), dtype=np.int64)
    model = AgglomerativeClustering(
        n_clusters=None, metric="cosine", linkage=linkage, distance_threshold=1.0 - threshold
    )
    return _renumber(model.fit_predict(x))


def kmeans(embeddings: Array, k: int, seed: int = 0) -> np.ndarray:
    """k-means on unit-length embeddings (so distances follow cosine similarity)."""
    from sklearn.cluster import KMeans

    x = _unit(embeddings)
    if not 1 <= k <= len(x):
        raise ValueError(f"k must be between 1 and the number of rows ({len(x)}), got {k}")
    return _renumber(KMeans(n_clusters=k, random_state=seed, n_init="auto").fit_predict(x))


def community_detection(
    embeddings: Array, threshold: float = 0.75, min_community_size: int = 10, chunk_size: int = 1024
) -> np.ndarray:
    """Fast community detection: dense groups whose members all have similarity >= ``threshold`` to a centre.

    Each row with at least ``min_community_size`` neighbours (itself included) at ``threshold`` or
    more proposes a community; the largest are taken first, each keeping only rows not yet taken,
    and kept if it still has ``min_community_size`` rows; communities of equal size are taken in the
    order of the rows that proposed them. Scores are computed ``chunk_size`` rows at a time, so memory
    holds chunk_size x n scores, plus the proposed communities. They are float32 products, whose last
    bits depend on ``chunk_size`` and the processor: a row within that rounding of ``threshold`` may
    fall on either side.
    """
    if min_community_size < 1:
        raise ValueError(f"min_community_size must be at least 1, got {min_community_size}")
    x = torch.from_numpy(_unit(embeddings))
    n = len(x)
    proposals: list[tuple[int, np.ndarray]] = []
    with torch.inference_mode():
        for start in range(0, n, chunk_size):
            scores = x[start : start + chunk_size] @ x.T
            counts = (scores >= threshold).sum(dim=1)
            for row in torch.nonzero(counts >= min_community_size).flatten().tolist():
                proposals.append((start + row, torch.nonzero(scores[row] >= threshold).flatten().numpy()))
    proposals.sort(key=lambda p: (-len(p[1]), p[0]))  # by proposer, not by score: no float noise in the order
    labels = np.full(n, -1, dtype=np.int64)
    taken = np.zeros(n, dtype=bool)
    next_id = 0
    for _, members in proposals:
        if len(members) < min_community_size:
            break
        free = members[~taken[members]]
        if len(free) >= min_community_size:
            labels[free], taken[free] = next_id, True
            next_id += 1
    return _renumber(labels)
