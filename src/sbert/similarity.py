"""Similarity between embeddings: cosine, dot, negative euclidean and negative manhattan distance.

Each function takes numpy arrays or torch tensors, (n, d) and (m, d) (a single (d,) vector counts as
one row). The plain form returns the (n, m) matrix; the ``pairwise_`` form compares row i with row i
and returns (n,). Higher always means more similar. A numpy input gives a numpy result, else torch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from sbert.arrays import Array, as_tensor


def _pair(a: Array, b: Array, pairwise: bool) -> tuple[torch.Tensor, torch.Tensor]:
    ta, tb = as_tensor(a), as_tensor(b)
    if ta.shape[1] != tb.shape[1]:
        raise ValueError(f"embedding widths differ: {ta.shape[1]} and {tb.shape[1]}")
    if pairwise and ta.shape[0] != tb.shape[0]:
        raise ValueError(f"pairwise needs the same number of rows, got {ta.shape[0]} and {tb.shape[0]}")
    if ta.dtype != tb.dtype:
        ta, tb = ta.float(), tb.float()
    return ta, tb.to(ta.device)


def _out(result: torch.Tensor, a: Array) -> Array:
    return result if isinstance(a, torch.Tensor) else result.cpu().numpy()


def cosine(a: Array, b: Array) -> Array:
    """(n, m) cosine similarity."""
    ta, tb = _pair(a, b, False)
    return _out(F.normalize(ta, dim=1) @ F.normalize(tb, dim=1).T, a)


def dot(a: Array, b: Array) -> Array:
    """(n, m) dot product."""
    ta, tb = _pair(a, b, False)
    return _out(ta @ tb.T, a)


def euclidean(a: Array, b: Array) -> Array:
    """(n, m) negative euclidean distance."""
    ta, tb = _pair(a, b, False)
    return _out(-torch.cdist(ta, tb, p=2.0, compute_mode="donot_use_mm_for_euclid_dist"), a)


def manhattan(a: Array, b: Array) -> Array:
    """(n, m) negative manhattan (L1) distance."""
    ta, tb = _pair(a, b, False)
    return _out(-torch.cdist(ta, tb, p=1.0), a)


def pairwise_cosine(a: Array, b: Array) -> Array:
    """(n,) cosine similarity of a[i] and b[i]."""
    ta, tb = _pair(a, b, True)
    return _out((F.normalize(ta, dim=1) * F.normalize(tb, dim=1)).sum(dim=1), a)


def pairwise_dot(a: Array, b: Array) -> Array:
    """(n,) dot product of a[i] and b[i]."""
    ta, tb = _pair(a, b, True)
    return _out((ta * tb).sum(dim=1), a)


def pairwise_euclidean(a: Array, b: Array) -> Array:
    """(n,) negative euclidean distance of a[i] and b[i]."""
    ta, tb = _pair(a, b, True)
    return _out(-(ta - tb).norm(p=2, dim=1), a)


def pairwise_manhattan(a: Array, b: Array) -> Array:
    """(n,) negative manhattan distance of a[i] and b[i]."""
    ta, tb = _pair(a, b, True)
    return _out(-(ta - tb).abs().sum(dim=1), a)


MATRIX: dict[str, Callable[[Array, Array], Array]] = {
    "cosine": cosine,
    "dot": dot,
    "euclidean": euclidean,
    "manhattan": manhattan,
}
PAIRWISE: dict[str, Callable[[Array, Array], Array]] = {
    "cosine": pairwise_cosine,
    "dot": pairwise_dot,
    "euclidean": pairwise_euclidean,
    "manhattan": pairwise_manhattan,
}


def get(name: str, pairwise: bool = False) -> Callable[[Array, Array], Array]:
    """The similarity function called ``name`` (cosine, dot, euclidean, manhattan)."""
    table = PAIRWISE if pairwise else MATRIX
    if name not in table:
        raise ValueError(f"unknown similarity {name!r}; expected one of {', '.join(table)}")
    return table[name]
