"""The dev evaluation of a training run: an evaluator for a file (or folder) in a training data format.

Scored pairs are scored by STS correlation, triplets by triplet accuracy (NLI gives triplets); a
cross-encoder has no vectors, so its dev data must be scored pairs.
"""

from __future__ import annotations

from pathlib import Path

from sbert.data.examples import ScoredPair, Triplet
from sbert.data.formats import data_format, formats_giving, read_examples
from sbert.evaluation.sts import STSEvaluator
from sbert.evaluation.triplet import TripletEvaluator

DEV_EVALUATORS: dict[type, type] = {ScoredPair: STSEvaluator, Triplet: TripletEvaluator}  # most wanted first


def dev_kinds(cross_encoder: bool = False) -> tuple[type, ...]:
    """The kinds of example a dev evaluation reads, most wanted first."""
    return (ScoredPair,) if cross_encoder else tuple(DEV_EVALUATORS)


def dev_evaluator(
    fmt: str, path: str | Path, seed: int = 0, cross_encoder: bool = False
) -> STSEvaluator | TripletEvaluator:
    """The evaluator of the dev data ``path`` in format ``fmt`` (named after the file)."""
    kind = data_format(fmt).kind_for(dev_kinds(cross_encoder))
    if kind is None:
        usable = ", ".join(formats_giving(dev_kinds(cross_encoder)))
        raise ValueError(f"dev format {fmt!r}: gives nothing a dev evaluation reads; expected one of {usable}")
    return DEV_EVALUATORS[kind](read_examples(fmt, path, kind, seed), name=Path(path).name)
