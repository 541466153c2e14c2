"""Clustering: planted clusters recovered, labels numbered by size, bad arguments refused."""

from __future__ import annotations

import numpy as np
import pytest

from sbert.search import cluster


def planted(sizes=(40, 25, 12), noise_rows=30, dim=32, spread=0.05, seed=0):
    """Tight groups around random directions, then scattered rows; returns embeddings and true groups."""
    rng = np.random.default_rng(seed)
    rows, groups, start = [], [], 0
    for size in sizes:
        centre = rng.normal(size=dim)
        centre /= np.linalg.norm(centre)
        rows.append(centre + spread * rng.normal(size=(size, dim)))
        groups.append(set(range(start, start + size)))
        start += size
    rows.append(rng.normal(size=(noise_rows, dim)))
    x = np.vstack(rows).astype(np.float32)
    order = rng.permutation(len(x))  # shuffle so that groups are not contiguous
    inverse = np.argsort(order)
    return x[order], [{int(inverse[r]) for r in g} for g in groups], {int(inverse[r]) for r in range(start, len(x))}


def test_community_detection_recovers_planted_clusters():
    x, groups, noise = planted()
    labels = cluster.community_detection(x, threshold=0.8, min_community_size=10, chunk_size=17)
    found = [set(g) for g in cluster.clusters(labels)]
    assert found == groups  # largest first
    assert all(labels[r] == -1 for r in noise)


def test_community_min_size_drops_small_groups():
    x, groups, _ = planted()
    labels = cluster.community_detection(x, threshold=0.8, min_community_size=20)
    assert [set(g) for g in cluster.clusters(labels)] == groups[:2]


def test_agglomerative_threshold_and_kmeans():
    x, groups, _ = planted(noise_rows=0)
    labels = cluster.agglomerative(x, threshold=0.8)
    assert [set(g) for g in cluster.clusters(labels)] == groups
    labels = cluster.kmeans(x, 3, seed=0)
    assert [set(g) for g in cluster.clusters(labels)] == groups
    assert labels.dtype == np.int64


def test_hand_made_similarity_threshold_is_cosine():
    x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype=np.float32)
    # cos(row0, row1) = 0.994; cos(row0, row2) = 0
    assert cluster.clusters(cluster.agglomerative(x, threshold=0.99)) == [[0, 1], [2, 3]]
    assert cluster.clusters(cluster.agglomerative(x, threshold=0.999)) == [[0], [1], [2], [3]]
    assert cluster.clusters(cluster.community_detection(x, 0.99, 2)) == [[0, 1], [2, 3]]


def test_bad_arguments():
    x = np.eye(4, dtype=np.float32)
    with pytest.raises(ValueError, match="k must be"):
        cluster.kmeans(x, 5)
    with pytest.raises(ValueError, match="min_community_size"):
        cluster.community_detection(x, 0.5, 0)


def test_community_detection_does_not_depend_on_chunk_size_with_duplicates():
    x, _, _ = planted(sizes=(15, 15, 12), noise_rows=10)
    x = np.vstack([x, x[:20]])  # exact duplicates: equal scores, equal-sized proposals
    runs = [cluster.community_detection(x, threshold=0.8, min_community_size=10, chunk_size=c) for c in (1024, 7, 50)]
    for labels in runs[1:]:
        np.testing.assert_array_equal(labels, runs[0])
    assert len(cluster.clusters(runs[0])) == 3


def test_sbert_cluster_is_the_search_module():
    """Clustering lives in sbert.search; ``sbert.cluster`` (and ``from sbert import cluster``) still finds it."""
    import sbert
    from sbert import cluster as via_package

    assert sbert.cluster is via_package is cluster
    assert via_package.community_detection(np.eye(3, dtype=np.float32), 0.5, 1).tolist() == [0, 1, 2]
