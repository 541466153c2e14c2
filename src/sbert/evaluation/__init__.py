"""Evaluators: ``evaluator(encoder) -> {metric: value}``; each names its ``primary`` metric."""

from sbert.evaluation.sts import STSEvaluator
from sbert.evaluation.triplet import TripletEvaluator

__all__ = ["STSEvaluator", "TripletEvaluator"]
