"""A training run described as data: which base model, which (data, objective) pairs, which settings.

``sbert train`` fills a ``RunSpec`` from its options or from a TOML/YAML file and calls ``run``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbert.data.examples import LabeledPair, ScoredPair, Triplet
from sbert.errors import InputFileError

FORMATS = ("stsb", "sick", "sts", "nli", "triplets")
OBJECTIVES = ("classification", "regression", "triplet", "mnrl")
SCORE_RANGES = {"stsb": (0.0, 5.0), "sts": (0.0, 5.0), "sick": (1.0, 5.0)}
_NEEDS = {
    "classification": (LabeledPair,),
    "regression": (ScoredPair,),
    "triplet": (Triplet,),
    "mnrl": (Triplet, LabeledPair, ScoredPair),
}


@dataclass
class ObjectiveSpec:
    """One (data, objective) pair. Options not used by the objective are ignored."""

    objective: str
    format: str
    train: list[str]
    concat: str = "u,v,|u-v|"  # classification
    num_labels: int = 3  # classification
    margin: float = 1.0  # triplet (the paper's epsilon)
    distance: str = "euclidean"  # triplet
    scale: float = 20.0  # mnrl

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective {self.objective!r}: expected one of {', '.join(OBJECTIVES)}")
        if self.format not in FORMATS:
            raise ValueError(f"format {self.format!r}: expected one of {', '.join(FORMATS)}")
        if isinstance(self.train, (str, Path)):
            self.train = [str(self.train)]
        if not self.train:
            raise ValueError(f"objective {self.objective!r} has no training data (train = [...])")


@dataclass
class RunSpec:
    out: str
    objectives: list[ObjectiveSpec]
    model: str = "default"
    init: str = "pretrained"  # or "random": same architecture, random weights (the no-pre-training control)
    pooling: str | None = None  # replace the model's pooling mode
    normalize: bool | None = None  # add (True) or remove (False) a final Normalize layer
    dev: str | None = None
    dev_format: str | None = None
    device: str | None = None
    allow_pickle: bool = False
    cross_encoder: bool = False  # train a CrossEncoder (regression: 1 label; classification: num_labels)
    config: Any = None  # TrainConfig

    def __post_init__(self) -> None:
        from sbert.training.trainer import TrainConfig

        if self.init not in ("pretrained", "random"):
            raise ValueError(f"init must be 'pretrained' or 'random', got {self.init!r}")
        if self.dev is not None and self.dev_format not in FORMATS:
            raise ValueError(f"dev format {self.dev_format!r}: expected one of {', '.join(FORMATS)}")
        if self.config is None:
            self.config = TrainConfig()
        if self.cross_encoder:
            if self.init != "pretrained" or self.pooling is not None or self.normalize is not None:
                raise ValueError("a cross-encoder run takes no --init random, --pooling or --normalize")
            kinds = {o.objective for o in self.objectives}
            if not kinds <= {"regression", "classification"} or len(kinds) > 1:
                raise ValueError("a cross-encoder trains one kind of objective: regression or classification")


def read_examples(fmt: str, path: str | Path, objective: str, seed: int = 0) -> list:
    """Read ``path`` in format ``fmt`` as examples for ``objective``.

    NLI pairs become (premise, entailment, contradiction) triplets for the triplet and mnrl objectives.
    """
    from sbert.data.nli import nli_to_triplets, read_nli
    from sbert.data.sts import read_semeval_sts, read_sick, read_stsb
    from sbert.data.triplets import read_triplets

    if fmt == "stsb":
        examples = list(read_stsb(path))
    elif fmt == "sick":
        examples = list(read_sick(path, target="entailment" if objective == "classification" else "relatedness"))
    elif fmt == "sts":
        examples = [p for pairs in read_semeval_sts(path).values() for p in pairs]
    elif fmt == "nli":
        examples = list(read_nli(path))
        if objective in ("triplet", "mnrl"):
            examples = nli_to_triplets(examples, seed=seed)
            if not examples:
                raise InputFileError(
                    f"{path}: no premise has both an entailment and a contradiction: no triplets to build"
                )
    elif fmt == "triplets":
        examples = list(read_triplets(path))
    else:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if not examples:
        raise InputFileError(f"{path}: no {fmt} examples found")
    if not isinstance(examples[0], _NEEDS[objective]):
        kinds = " or ".join(t.__name__ for t in _NEEDS[objective])
        raise ValueError(
            f"objective {objective!r} needs {kinds} examples, but format {fmt!r} gives "
            f"{type(examples[0]).__name__} ({path})"
        )
    return examples


def make_loss(spec: ObjectiveSpec, dim: int):
    from sbert.losses import CosineRegressionLoss, MultipleNegativesRankingLoss, SoftmaxLoss, TripletLoss

    if spec.objective == "classification":
        return SoftmaxLoss(dim, spec.num_labels, spec.concat)
    if spec.objective == "regression":
        return CosineRegressionLoss(SCORE_RANGES.get(spec.format, (0.0, 5.0)))
    if spec.objective == "triplet":
        return TripletLoss(spec.distance, spec.margin)
    return MultipleNegativesRankingLoss(spec.scale)


def make_evaluator(fmt: str, path: str | Path, seed: int = 0):
    """An STS evaluator for scored formats, a triplet-accuracy evaluator for triplets and NLI."""
    from sbert.evaluation import STSEvaluator, TripletEvaluator

    if fmt in ("stsb", "sick", "sts"):
        return STSEvaluator(read_examples(fmt, path, "regression"), name=Path(path).name)
    return TripletEvaluator(read_examples(fmt, path, "triplet", seed), name=Path(path).name)


def build_encoder(
    model: str,
    init: str = "pretrained",
    pooling: str | None = None,
    seed: int = 0,
    normalize: bool | None = None,
    **load_kwargs,
):
    """Load the base model; optionally re-initialise its transformer, change its pooling, and add
    (``normalize=True``) or remove (``False``) a final Normalize layer (``None`` keeps the model's)."""
    import sbert
    from sbert.encoder import Encoder
    from sbert.modules import Dense, Normalize, Pooling

    encoder = sbert.load(model, **load_kwargs)
    if normalize is not None:
        modules = [m for m in encoder if not isinstance(m, Normalize)] + ([Normalize()] if normalize else [])
        path = encoder.path
        encoder = Encoder(modules, encoder.similarity_fn_name, encoder.truncate_dim, encoder.settings)
        encoder.path = path
    if init == "random":
        encoder[0] = encoder.transformer.reinitialized(seed).to(encoder.device)
    if pooling is not None:
        index = next(i for i, m in enumerate(encoder) if isinstance(m, Pooling))
        old = encoder[index]
        new = Pooling(old.word_dim, pooling)
        if new.dim != old.dim and any(isinstance(m, Dense) for m in encoder):
            raise ValueError(
                f"pooling {pooling!r} changes the width from {old.dim} to {new.dim}, "
                "which the model's Dense layer cannot take"
            )
        encoder[index] = new
    return encoder


def make_cross_loss(spec: ObjectiveSpec):
    from sbert.losses.cross_encoder import CrossEncoderClassificationLoss, CrossEncoderScoreLoss

    if spec.objective == "regression":
        return CrossEncoderScoreLoss(SCORE_RANGES.get(spec.format, (0.0, 5.0)))
    return CrossEncoderClassificationLoss()


def run(spec: RunSpec, resume: bool = False) -> dict:
    """Build everything ``spec`` names, train, and return the trainer's summary."""
    from sbert.training.trainer import Objective, Trainer

    seed = spec.config.seed
    if spec.cross_encoder:
        return _run_cross_encoder(spec, resume)
    encoder = build_encoder(
        spec.model,
        spec.init,
        spec.pooling,
        seed,
        spec.normalize,
        device=spec.device,
        allow_pickle=spec.allow_pickle,
    )
    objectives = []
    for i, o in enumerate(spec.objectives):
        examples = [e for path in o.train for e in read_examples(o.format, path, o.objective, seed)]
        objectives.append(Objective(examples, make_loss(o, encoder.model_dim), f"{i}:{o.objective}:{o.format}"))
    evaluator = make_evaluator(spec.dev_format, spec.dev, seed) if spec.dev else None
    trainer = Trainer(encoder, objectives, spec.config, spec.out, evaluator=evaluator, device=spec.device)
    return trainer.train(resume=resume)


def _run_cross_encoder(spec: RunSpec, resume: bool) -> dict:
    """A cross-encoder from ``spec.model``'s transformer (a new head) trained on pairs."""
    from sbert.cross_encoder import CrossEncoder
    from sbert.training.trainer import Objective, Trainer

    seed = spec.config.seed
    first = spec.objectives[0]
    labels = 1 if first.objective == "regression" else first.num_labels
    import torch

    torch.manual_seed(seed)  # seeds the new head's initialisation
    model = CrossEncoder.load(spec.model, num_labels=labels, device=spec.device, allow_pickle=spec.allow_pickle)
    objectives = []
    for i, o in enumerate(spec.objectives):
        examples = [e for path in o.train for e in read_examples(o.format, path, o.objective, seed)]
        objectives.append(Objective(examples, make_cross_loss(o), f"{i}:cross-{o.objective}:{o.format}"))
    evaluator = None
    if spec.dev:
        if spec.dev_format not in ("stsb", "sick", "sts"):
            raise ValueError("a cross-encoder's dev data must be scored pairs (stsb, sick or sts)")
        evaluator = make_evaluator(spec.dev_format, spec.dev, seed)
    trainer = Trainer(model, objectives, spec.config, spec.out, evaluator=evaluator, device=spec.device)
    return trainer.train(resume=resume)


def finished_message(summary: dict) -> str:
    """What ``sbert train`` says at the end of a run: steps, speed, best dev score, where things went."""
    best = f", best dev {summary['best_score']:.2f}" if summary["best_score"] is not None else ""
    kept = (
        f"checkpoint kept at {summary['checkpoint']}"
        if summary.get("checkpoint")
        else "checkpoint removed (--keep-checkpoint keeps it)"
    )
    return (
        f"trained {summary['steps']} steps ({summary['steps_per_second']:.2f} steps/s){best}; "
        f"model saved to {summary['model']}; log in {summary['log']}; {kept}"
    )


def load_run_file(path: str | Path, overrides: dict[str, Any] | None = None) -> RunSpec:
    """Read a run from TOML or YAML: top-level run keys, a ``[train]`` table of TrainConfig fields and
    one ``[[objectives]]`` table per (data, objective) pair."""
    from sbert.data.paths import read_text
    from sbert.training.trainer import TrainConfig

    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such run file")
    text = read_text(path)
    try:
        if path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise InputFileError(f"{path}: expected a .toml, .yaml or .yml run file")
    except (ValueError, ImportError) as err:  # tomllib.TOMLDecodeError and yaml.YAMLError are ValueErrors
        raise InputFileError(f"{path}: cannot parse: {err}") from err
    if not isinstance(data, dict):
        raise InputFileError(f"{path}: expected a table of settings at the top")
    data = {**data, **(overrides or {})}
    try:
        config = TrainConfig(**data.pop("train", {}))
        objectives = [ObjectiveSpec(**o) for o in data.pop("objectives", [])]
        return RunSpec(objectives=objectives, config=config, **data)
    except TypeError as err:  # an unknown key
        known = [f.name for f in dataclasses.fields(RunSpec)]
        raise InputFileError(f"{path}: {err}; run keys are {', '.join(known)}") from err


def spec_from_options(options: dict[str, Any], train: Sequence[str]) -> RunSpec:
    """The single-objective run of ``sbert train``'s command-line options."""
    from sbert.training.trainer import TrainConfig

    config_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    objective_fields = {f.name for f in dataclasses.fields(ObjectiveSpec)}
    config = TrainConfig(**{k: v for k, v in options.items() if k in config_fields and v is not None})
    objective = ObjectiveSpec(
        train=list(train),
        **{k: v for k, v in options.items() if k in objective_fields and k != "train" and v is not None},
    )
    run_keys = {
        "out",
        "model",
        "init",
        "pooling",
        "normalize",
        "dev",
        "dev_format",
        "device",
        "allow_pickle",
        "cross_encoder",
    }
    return RunSpec(
        objectives=[objective],
        config=config,
        **{k: v for k, v in options.items() if k in run_keys and v is not None},
    )


__all__ = [
    "FORMATS",
    "OBJECTIVES",
    "ObjectiveSpec",
    "RunSpec",
    "finished_message",
    "load_run_file",
    "run",
    "spec_from_options",
]
