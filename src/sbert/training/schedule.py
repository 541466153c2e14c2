"""Learning-rate schedule of SBERT: linear warm-up from 0 over the first steps, then linear decay to 0."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def warmup_steps(total_steps: int, warmup: float) -> int:
    """Warm-up length: ``warmup`` as a fraction of all steps (0.1 in the paper), rounded up."""
    if not 0.0 <= warmup <= 1.0:
        raise ValueError(f"warmup is a fraction of the steps, between 0 and 1; got {warmup}")
    return math.ceil(total_steps * warmup)


def warmup_then_linear_decay(optimizer: Optimizer, warmup: int, total: int) -> LambdaLR:
    """Multiply the learning rate by step/warmup, then by (total - step)/(total - warmup)."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return LambdaLR(optimizer, factor)
