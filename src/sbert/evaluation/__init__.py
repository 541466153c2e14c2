"""Evaluators: ``evaluator(model) -> {metric: value}``; each names its headline metric,
``evaluator.primary_metric(model)`` (``sbert.evaluation.base.Evaluator``).

The evaluators load on first use (scipy, scikit-learn), so that reading the task table
(``sbert.evaluation.tasks``) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sbert.evaluation.base import Evaluator
    from sbert.evaluation.retrieval import RetrievalEvaluator
    from sbert.evaluation.sts import STSEvaluator
    from sbert.evaluation.triplet import TripletEvaluator

_HOMES = {
    "Evaluator": "base",
    "RetrievalEvaluator": "retrieval",
    "STSEvaluator": "sts",
    "TripletEvaluator": "triplet",
}
__all__ = ["Evaluator", "RetrievalEvaluator", "STSEvaluator", "TripletEvaluator"]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"sbert.evaluation.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'sbert.evaluation' has no attribute {name!r}")
