"""What the trainer and ``sbert eval`` need from an evaluator."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Evaluator(Protocol):
    """``evaluator(model) -> {metric: value}``, naming its own headline metric.

    ``primary_metric(model)`` is the key, in what ``evaluator(model)`` returns, of the number a table shows
    and the trainer keeps the best model by (higher is better). It may depend on the model: a
    cross-encoder's STS numbers are correlations of its scores, not of cosine similarities.
    """

    name: str

    def __call__(self, model: Any, show_progress: bool | None = None) -> dict[str, float]: ...

    def primary_metric(self, model: Any) -> str: ...
