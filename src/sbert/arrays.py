"""Embeddings in and out: numpy arrays or torch tensors, converted in one place."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

    Array = np.ndarray | torch.Tensor
else:
    Array = np.ndarray  # annotations only; torch is imported where a tensor is made (``import sbert`` stays light)


def as_tensor(x: Array) -> torch.Tensor:
    """(n, d) floating tensor from numpy or torch (no copy where possible); a single (d,) vector becomes one row."""
    import torch

    if isinstance(x, torch.Tensor):
        t = x
    else:
        with warnings.catch_warnings():  # read-only arrays (memory-mapped indexes) are only ever read here
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            t = torch.from_numpy(np.asarray(x))
    if t.ndim == 1:
        t = t.unsqueeze(0)
    if t.ndim != 2:
        raise ValueError(f"expected embeddings of shape (n, d) or (d,), got shape {tuple(t.shape)}")
    return t if t.is_floating_point() else t.float()


def as_float32(x: Array) -> np.ndarray:
    """(n, d) float32 numpy array from numpy or torch (any device); a single (d,) vector becomes one row."""
    if isinstance(x, np.ndarray):  # without torch: the query path of an ONNX-built index never imports it
        a = x[None, :] if x.ndim == 1 else x
        if a.ndim != 2:
            raise ValueError(f"expected embeddings of shape (n, d) or (d,), got shape {tuple(a.shape)}")
        return a.astype(np.float32, copy=False)
    return as_tensor(x).detach().float().cpu().numpy()
