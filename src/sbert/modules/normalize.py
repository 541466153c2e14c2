"""Normalize: scale each sentence vector to unit L2 length, so that dot product equals cosine."""

from __future__ import annotations

from pathlib import Path

import torch.nn.functional as F

from sbert.modules.base import Features, Module


class Normalize(Module):
    """``features['sentence_embedding'] /= ||features['sentence_embedding']||_2``."""

    type_name = "sentence_transformers.models.Normalize"

    def forward(self, features: Features) -> Features:
        features["sentence_embedding"] = F.normalize(features["sentence_embedding"], p=2, dim=1)
        return features

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)

    @classmethod
    def load(cls, path: Path, *, allow_pickle: bool = False) -> Normalize:
        return cls()  # no config, no weights; the folder may even be absent
