"""Training objectives. Each loss is called as ``loss(encoder, batch) -> scalar tensor``.

- ``SoftmaxLoss``: classification on (u, v, |u-v|, ...) — SBERT §3, NLI.
- ``CosineRegressionLoss``: MSE between cos(u, v) and the scaled gold score — SBERT §3, STS.
- ``TripletLoss``: max(d(a,p) - d(a,n) + margin, 0) — SBERT §3.
- ``MultipleNegativesRankingLoss``: in-batch negatives, cross-entropy over scaled cosine.
- ``CachedMultipleNegativesRankingLoss``: the same with gradient caching, for batches larger than memory.

Bi-encoder losses take a ``sbert.protocols.TrainableEncoder``. ``sbert.losses.objectives.OBJECTIVES``
names them (the objectives of run files and ``sbert train --objective``): adding a loss is a module here
and one entry there.
"""

from sbert.losses.cached_in_batch import CachedMultipleNegativesRankingLoss
from sbert.losses.in_batch import MultipleNegativesRankingLoss
from sbert.losses.regression import CosineRegressionLoss
from sbert.losses.softmax import CONCAT_MODES, SoftmaxLoss
from sbert.losses.triplet import TripletLoss

__all__ = [
    "CONCAT_MODES",
    "CachedMultipleNegativesRankingLoss",
    "CosineRegressionLoss",
    "MultipleNegativesRankingLoss",
    "SoftmaxLoss",
    "TripletLoss",
]
