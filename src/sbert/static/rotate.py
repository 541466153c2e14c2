"""Order a model's coordinates by how much they vary on a corpus, so that its first ones are the best
truncation (``truncate_dim``, ``sbert index build --truncate-dim``), without training and without labels.

The model's vectors of the corpus give the principal axes (``sbert.static.distill.fit_pca`` at full width: the
eigenvectors of their covariance, most variance first). A ``Dense`` layer without bias or activation turns
each vector onto those axes. It is a rotation (an orthogonal matrix, not centred), so at full width every
cosine, dot product and length is what it was, to float rounding; cut to its first k coordinates, a vector
keeps the k directions along which the corpus's vectors differ most, where plain truncation keeps
whichever k coordinates the model happens to put first. The folder written loads in sentence-transformers
(a ``Dense`` module with ``torch.nn.Identity``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sbert.data.corpus import Columns
from sbert.encoder import Encoder
from sbert.modules import Dense

WIDTHS = (64, 128, 256)  # the widths whose share of the variance a summary reports


def principal_rotation(vectors: np.ndarray) -> np.ndarray:
    """The (width, width) orthogonal matrix whose rows are the principal axes of ``vectors`` (n, width),
    most variance first, each signed as ``fit_pca`` signs it; needs at least ``width`` vectors."""
    from sbert.static.distill import fit_pca

    n, width = vectors.shape
    if n < width:
        raise ValueError(f"the principal axes of {width}-dimensional vectors need at least {width} texts, got {n}")
    return fit_pca(vectors, width).components.T


def variance_kept(
    vectors: np.ndarray, rotation: np.ndarray, widths: Sequence[int] = WIDTHS
) -> dict[int, tuple[float, float]]:
    """For each width k, the share of the vectors' variance (about their mean) in the first k coordinates,
    before (``plain``) and after the rotation: ``{k: (plain, rotated)}``."""
    centred = vectors.astype(np.float64) - vectors.mean(axis=0)
    plain, turned = (centred**2).sum(axis=0), ((centred @ rotation.T) ** 2).sum(axis=0)
    total = plain.sum()
    return {k: (float(plain[:k].sum() / total), float(turned[:k].sum() / total)) for k in widths if k < len(plain)}


def rotated(encoder: Encoder, rotation: np.ndarray) -> Encoder:
    """``encoder`` with a bias-free, activation-free ``Dense`` after its last module applying ``rotation``."""
    width = encoder.model_dim
    if rotation.shape != (width, width):
        raise ValueError(f"the rotation must be ({width}, {width}) for this model, got {rotation.shape}")
    layer = Dense(width, width, bias=False, activation=nn.Identity())
    device = next(encoder.parameters()).device
    with torch.no_grad():
        layer.linear.weight.copy_(torch.from_numpy(rotation.astype(np.float32)))
    encoder.append(layer.to(device))
    return encoder


def rotate_model(
    base: str | Path,
    corpus: str | Path,
    out: str | Path,
    *,
    max_texts: int = 50_000,
    truncate_dim: int | None = None,
    batch_size: int = 32,
    seed: int = 0,
    device: str | None = None,
    allow_pickle: bool = False,
    show_progress: bool | None = None,
    columns: Columns | None = None,
    overwrite: bool = True,
) -> dict:
    """``sbert rotate``: embed up to ``max_texts`` documents of ``corpus`` (a BEIR folder or a corpus file read
    as ``sbert index build`` reads it, ``columns`` naming its fields; drawn with ``seed`` when it holds more)
    as documents, rotate ``base`` onto their principal axes, set ``truncate_dim`` if given, write
    ``out`` (a model already there is refused, before any work, unless ``overwrite``); returns a summary
    (texts, width, the variance kept at 64/128/256 dimensions before and after)."""
    import sbert
    from sbert.atomic import check_model_target
    from sbert.data.corpus import read_corpus_documents

    check_model_target(out, overwrite)

    documents, path = read_corpus_documents(corpus, columns)
    texts = [document.joined() for document in documents]
    if len(texts) > max_texts:
        chosen = np.random.default_rng(seed).choice(len(texts), max_texts, replace=False)
        texts = [texts[i] for i in sorted(chosen)]
    encoder = sbert.load(base, device=device, allow_pickle=allow_pickle)
    encoder.truncate_dim = truncate_dim  # checked before the corpus is embedded, not after
    if max_texts < encoder.model_dim:
        raise ValueError(
            f"max_texts={max_texts}: the principal axes of this model's {encoder.model_dim}-dimensional vectors "
            f"need at least {encoder.model_dim} documents"
        )
    if len(texts) < encoder.model_dim:
        raise ValueError(
            f"{path}: {len(texts)} documents; the principal axes of this model's {encoder.model_dim}-dimensional "
            f"vectors need at least {encoder.model_dim}"
        )
    vectors = encoder.encode_document(
        texts,
        batch_size=batch_size,
        truncate_dim=encoder.model_dim,
        on_truncation="ignore",
        show_progress=show_progress,
    )
    rotation = principal_rotation(vectors)
    model = rotated(encoder, rotation)
    model.save(out)
    kept = variance_kept(vectors, rotation)
    return {"out": str(out), "corpus": str(path), "texts": len(texts), "width": encoder.model_dim, "kept": kept}
