"""Embeddings to two dimensions (UMAP, PCA or t-SNE) and the seeded sample a large map shows."""

from __future__ import annotations

from typing import Any

import numpy as np

METHODS = ("umap", "pca", "tsne")
NAMES = {"umap": "UMAP", "pca": "PCA", "tsne": "t-SNE"}
FEW_FOR_UMAP = 50  # below this many points a UMAP map shows little more than noise


def sample_rows(n: int, max_points: int | None, seed: int = 0) -> np.ndarray:
    """Rows a picture of ``n`` points shows: all of them, or ``max_points`` drawn at random (seeded),
    in their original order."""
    if max_points is not None and max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    if max_points is None or n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


def unit_rows(embeddings: Any) -> np.ndarray:
    """(n, d) float64 rows scaled to unit length: distances then follow cosine similarity."""
    x = np.asarray(embeddings.detach().cpu().float() if hasattr(embeddings, "detach") else embeddings, dtype=np.float64)
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"expected a non-empty (n, d) array of embeddings, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def project(embeddings: Any, method: str = "umap", seed: int = 0) -> tuple[np.ndarray, tuple[str, str]]:
    """(n, 2) coordinates of the unit-length ``embeddings`` and the names of the two axes.

    ``method``: "umap" (umap-learn, cosine metric, 15 neighbours or n - 1), "pca" (scikit-learn; the
    axes say the share of variance each explains) or "tsne" (scikit-learn, cosine metric, perplexity 30
    or less for few points). Seeded, so the same input gives the same map."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    x = unit_rows(embeddings)
    n, name = len(x), NAMES[method]
    least = {"pca": 2, "tsne": 3, "umap": 4}[method]
    if n < least:
        raise ValueError(f"a {name} map needs at least {least} points; got {n}")
    if method == "pca":
        from sklearn.decomposition import PCA

        pca = PCA(n_components=2, random_state=seed)
        points = pca.fit_transform(x)
        shares = 100 * pca.explained_variance_ratio_
        return points, (f"PC 1 ({shares[0]:.1f}% of variance)", f"PC 2 ({shares[1]:.1f}% of variance)")
    if method == "tsne":
        from sklearn.manifold import TSNE

        tsne = TSNE(n_components=2, metric="cosine", init="pca", perplexity=min(30.0, (n - 1) / 3), random_state=seed)
        return tsne.fit_transform(x), (f"{name} 1", f"{name} 2")
    import umap

    reducer = umap.UMAP(
        n_components=2,
        metric="cosine",
        n_neighbors=min(15, n - 1),
        random_state=seed,
        n_jobs=1,
        init="random" if n < 50 else "spectral",
    )
    return np.asarray(reducer.fit_transform(x), dtype=np.float64), (f"{name} 1", f"{name} 2")
