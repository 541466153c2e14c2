"""Classification objective (SBERT §3): softmax(W · concat(u, v, ...)), cross-entropy.

The concatenation is one of the paper's ablation modes (Table 6); the default is (u, v, |u-v|).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sbert.data.examples import LabeledPair
from sbert.protocols import TrainableEncoder

PARTS = ("u", "v", "|u-v|", "u*v")
CONCAT_MODES = ("u,v", "|u-v|", "u*v", "|u-v|,u*v", "u,v,u*v", "u,v,|u-v|", "u,v,|u-v|,u*v")


def parse_concat(spec: str | Sequence[str]) -> tuple[str, ...]:
    """``"(u, v, |u-v|)"`` -> ``("u", "v", "|u-v|")``; parts are u, v, |u-v| and u*v, each at most once."""
    parts = spec.strip("() ").replace(" ", "").split(",") if isinstance(spec, str) else list(spec)
    if not parts or any(p not in PARTS for p in parts) or len(set(parts)) != len(parts):
        raise ValueError(
            f"concatenation {spec!r}: expected parts among {', '.join(PARTS)}, each at most once "
            f"(the paper's modes: {'; '.join(CONCAT_MODES)})"
        )
    return tuple(parts)


def concatenate(u: torch.Tensor, v: torch.Tensor, parts: Sequence[str]) -> torch.Tensor:
    """(B, d) and (B, d) -> (B, len(parts) * d), in the order of ``parts``."""
    pieces = {"u": lambda: u, "v": lambda: v, "|u-v|": lambda: (u - v).abs(), "u*v": lambda: u * v}
    return torch.cat([pieces[p]() for p in parts], dim=1)


class SoftmaxLoss(nn.Module):
    """Cross-entropy of a linear classifier over the concatenated pair representation."""

    def __init__(self, dim: int, num_labels: int = 3, concat: str | Sequence[str] = "u,v,|u-v|") -> None:
        super().__init__()
        self.parts = parse_concat(concat)
        self.classifier = nn.Linear(len(self.parts) * dim, num_labels)

    def logits(self, encoder: TrainableEncoder, batch: Sequence[LabeledPair]) -> torch.Tensor:
        u, v = encoder.embed_with_grad([p.sentence1 for p in batch], [p.sentence2 for p in batch])
        return self.classifier(concatenate(u, v, self.parts))

    def forward(self, encoder: TrainableEncoder, batch: Sequence[LabeledPair]) -> torch.Tensor:
        labels = torch.tensor([p.label for p in batch], device=encoder.device)
        return F.cross_entropy(self.logits(encoder, batch), labels)
