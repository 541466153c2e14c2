"""The training objectives by name: which examples each needs, its settings, and its loss for a
bi-encoder (an ``Encoder``) and, where there is one, for a cross-encoder.

Adding a loss: a module in ``sbert/losses`` and one entry in ``OBJECTIVES``; run files and
``sbert train --objective`` then know it, its settings are keys of ``[[objectives]]`` tables, and each
setting is an ``sbert train`` option (``--<setting-name>``, made from ``settings``, ``SETTING_HELP`` and
``SETTING_CHOICES``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from sbert.data.examples import DistillationExample, LabeledPair, RetrievalExample, ScoredPair, Text, Triplet
from sbert.losses.cached_in_batch import CachedMultipleNegativesRankingLoss
from sbert.losses.cross_encoder import CrossEncoderClassificationLoss, CrossEncoderScoreLoss
from sbert.losses.denoising import DELETE_RATIO, DenoisingAutoEncoderLoss
from sbert.losses.distillation import SIMILARITIES, DistillKLDivLoss, EmbeddingMSELoss, MarginMSELoss
from sbert.losses.in_batch import MultipleNegativesRankingLoss, guide_from
from sbert.losses.regression import CosineRegressionLoss
from sbert.losses.softmax import SoftmaxLoss
from sbert.losses.teachers import teacher_from
from sbert.losses.triplet import DISTANCES, TripletLoss

ScoreRange = tuple[float, float]
DEFAULT_SCORE_RANGE: ScoreRange = (0.0, 5.0)  # for scored pairs of a format that names no scale
# What in-batch-negatives objectives read, most wanted first: rows with hard negatives, then triplets, then pairs.
IN_BATCH_EXAMPLES = (RetrievalExample, Triplet, ScoredPair, LabeledPair)
# What the teacher's-candidates objectives read: rows with teacher scores, or rows a --teacher scores.
DISTILL_EXAMPLES = (DistillationExample, RetrievalExample, Triplet)
# GISTEmbed's guided masking, an option of the in-batch objectives (empty guide: none).
GUIDE_SETTINGS = {"guide": "", "guide_margin": 0.0, "margin_strategy": "absolute"}
# In-batch objectives take every pair as a positive: scored pairs (STSb's 0-5) train only at or above
# ``positive_score``, and are refused while it is 0 (a pair scored 0 is no positive).
POSITIVE_SETTINGS = {"positive_score": 0.0}


@dataclass(frozen=True)
class LossInputs:
    """What a loss is built from: the objective's settings, the model's vector width, the gold scores' scale,
    the bi-encoder itself (for a loss whose own modules share its weights: TSDAE's decoder), and how many
    tokens of a text it trains on (a teacher or guide reads no more: it scores the text the student reads)."""

    settings: Mapping[str, Any]
    dim: int
    score_range: ScoreRange = DEFAULT_SCORE_RANGE
    model: Any = None
    text_length: int | None = None
    seed: int | None = None  # a loss that draws at random (TSDAE's deletions): its generator's seed; None: torch's


@dataclass(frozen=True)
class ObjectiveKind:
    """One objective: the examples it takes (most wanted first), its settings with their defaults, and
    how to build its loss for a bi-encoder and (``None``: not trainable so) a cross-encoder, whose head
    then has ``cross_labels(settings)`` outputs; ``in_batch``: it scores each row against the other rows'
    texts (in-batch negatives, what a ``guide`` masks)."""

    needs: tuple[type, ...]
    bi_encoder: Callable[[LossInputs], nn.Module]
    settings: dict[str, Any] = field(default_factory=dict)
    cross_encoder: Callable[[LossInputs], nn.Module] | None = None
    cross_labels: Callable[[Mapping[str, Any]], int] | None = None
    help: str = ""
    in_batch: bool = False

    @property
    def needs_teacher(self) -> bool:
        """Whether a teacher model (its ``teacher`` setting) scores the rows it learns from."""
        return "teacher" in self.settings

    @property
    def texts_alone(self) -> bool:
        """Whether it learns from texts alone (``Text`` rows: no pairs, no labels)."""
        return self.needs == (Text,)


def _guide(x: LossInputs):
    """The GISTEmbed guide an in-batch objective's settings name (or None), reading no further than the student."""
    return guide_from(x.settings, x.text_length)


def _teacher(x: LossInputs):
    """The teacher an objective's ``teacher`` setting names, reading a text no further than the student."""
    return teacher_from(x.settings["teacher"], x.text_length)


OBJECTIVES: dict[str, ObjectiveKind] = {
    "classification": ObjectiveKind(
        needs=(LabeledPair,),
        settings={"concat": "u,v,|u-v|", "num_labels": 3},
        bi_encoder=lambda x: SoftmaxLoss(x.dim, x.settings["num_labels"], x.settings["concat"]),
        cross_encoder=lambda x: CrossEncoderClassificationLoss(),
        cross_labels=lambda settings: settings["num_labels"],
        help="softmax over concat(u, v, ...) of labelled pairs (SBERT §3, NLI)",
    ),
    "regression": ObjectiveKind(
        needs=(ScoredPair,),
        bi_encoder=lambda x: CosineRegressionLoss(x.score_range),
        cross_encoder=lambda x: CrossEncoderScoreLoss(x.score_range),
        cross_labels=lambda settings: 1,
        help="MSE of cos(u, v) against the scaled gold score (SBERT §3, STS)",
    ),
    "triplet": ObjectiveKind(
        needs=(Triplet,),
        settings={"margin": 1.0, "distance": "euclidean"},
        bi_encoder=lambda x: TripletLoss(x.settings["distance"], x.settings["margin"]),
        help="max(d(a, p) - d(a, n) + margin, 0) (SBERT §3)",
    ),
    "mnrl": ObjectiveKind(
        needs=IN_BATCH_EXAMPLES,
        settings={"scale": 20.0, **POSITIVE_SETTINGS, **GUIDE_SETTINGS},
        bi_encoder=lambda x: MultipleNegativesRankingLoss(x.settings["scale"], _guide(x)),
        in_batch=True,
        help="in-batch negatives: cross-entropy over scaled cosine (0..n hard negatives per row)",
    ),
    "cached-mnrl": ObjectiveKind(
        needs=IN_BATCH_EXAMPLES,
        settings={"scale": 20.0, "mini_batch_size": 32, **POSITIVE_SETTINGS, **GUIDE_SETTINGS},
        bi_encoder=lambda x: CachedMultipleNegativesRankingLoss(
            x.settings["scale"], x.settings["mini_batch_size"], _guide(x)
        ),
        in_batch=True,
        help="mnrl with gradient caching (GradCache): large batches in the memory of mini_batch_size texts",
    ),
    "simcse": ObjectiveKind(
        needs=(Text,),
        settings={"scale": 20.0, **GUIDE_SETTINGS},
        bi_encoder=lambda x: MultipleNegativesRankingLoss(x.settings["scale"], _guide(x)),
        in_batch=True,
        help="SimCSE: each text against itself under other dropout, in-batch negatives (texts alone)",
    ),
    "margin-mse": ObjectiveKind(
        needs=DISTILL_EXAMPLES,
        settings={"teacher": "", "similarity": "dot"},
        bi_encoder=lambda x: MarginMSELoss(_teacher(x), x.settings["similarity"]),
        help="distillation: MSE of the student's margins s(q,p) - s(q,n) against the teacher's",
    ),
    "distill-kl": ObjectiveKind(
        needs=DISTILL_EXAMPLES,
        settings={"teacher": "", "similarity": "dot", "temperature": 1.0},
        bi_encoder=lambda x: DistillKLDivLoss(_teacher(x), x.settings["similarity"], x.settings["temperature"]),
        help="distillation: KL of the student's softmax over each row's candidates from the teacher's",
    ),
    "embedding-mse": ObjectiveKind(
        needs=(Text,),
        settings={"teacher": "", "target_loss": "auto"},
        bi_encoder=lambda x: EmbeddingMSELoss(_teacher(x), x.settings.get("target_loss", "auto")),
        help="distillation: MSE of the student's vectors against a bi-encoder teacher's (texts alone; a narrower "
        "student, a static model: cosine to the teacher's vectors PCA-projected to its width)",
    ),
    "tsdae": ObjectiveKind(
        needs=(Text,),
        settings={"delete_ratio": DELETE_RATIO},
        bi_encoder=lambda x: DenoisingAutoEncoderLoss(x.model, x.settings["delete_ratio"], seed=x.seed),
        help="TSDAE: a decoder tied to the encoder rebuilds each text from the vector of its words with "
        "delete_ratio of them deleted (texts alone)",
    ),
}


def objective_kind(name: str) -> ObjectiveKind:
    """``OBJECTIVES[name]``, or a ValueError naming the objectives there are."""
    if name not in OBJECTIVES:
        raise ValueError(f"objective {name!r}: expected one of {', '.join(OBJECTIVES)}")
    return OBJECTIVES[name]


# What the command line says of each setting (``sbert train --<name>``); the objectives using it and their
# defaults are added from ``OBJECTIVES``. A setting without an entry is shown by its objectives alone.
SETTING_HELP = {
    "concat": "Classification features, e.g. 'u,v,|u-v|' or 'u,v,|u-v|,u*v'.",
    "num_labels": "Classification: the number of labels.",
    "margin": "Triplet margin (1: the paper's).",
    "distance": "Triplet distance.",
    "scale": "In-batch objectives: the factor on cosine scores before the softmax.",
    "mini_batch_size": "cached-mnrl: texts per pass.",
    "positive_score": "In-batch objectives on scored pairs (--format stsb, sick, sts): train the pairs scored at "
    "least this as positives (0: scored pairs are refused).",
    "guide": "A local bi-encoder; drops in-batch negatives it scores above the positive.",
    "guide_margin": "--guide: slack below the positive's guide score.",
    "margin_strategy": "--guide-margin: absolute, or relative to the positive's score.",
    "teacher": "A local bi- or cross-encoder scoring rows.",
    "similarity": "Distillation: the student's score, dot product or cosine.",
    "temperature": "distill-kl: softmax temperature.",
}
SETTING_CHOICES = {
    "distance": tuple(DISTANCES),
    "margin_strategy": ("absolute", "relative"),
    "similarity": tuple(SIMILARITIES),
}


def setting_defaults() -> dict[str, dict[str, Any]]:
    """Each setting -> {objective: its default there}, settings in the order ``OBJECTIVES`` first names them."""
    out: dict[str, dict[str, Any]] = {}
    for name, kind in OBJECTIVES.items():
        for key, default in kind.settings.items():
            out.setdefault(key, {})[name] = default
    return out


def setting_names() -> set[str]:
    """Every objective's settings: the keys an ``[[objectives]]`` table may have besides its data."""
    return {key for kind in OBJECTIVES.values() for key in kind.settings}
