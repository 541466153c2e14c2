"""Build what a ``RunSpec`` names and train it: one path for bi-encoders and cross-encoders.

``sbert train`` fills a ``RunSpec`` (``sbert.training.spec``) from its options or a TOML/YAML file and
calls ``run``. The data formats come from ``sbert.data.formats``, the objectives and their losses from
``sbert.losses.objectives``, the dev evaluation from ``sbert.evaluation.dev``.
"""

from __future__ import annotations

import logging
from typing import TypeVar, cast

from torch import nn

from sbert.data.examples import ScoredPair
from sbert.data.formats import read_examples
from sbert.errors import InputFileError
from sbert.evaluation.dev import dev_evaluator
from sbert.losses.in_batch import Dropped
from sbert.losses.objectives import OBJECTIVES, LossInputs
from sbert.training.spec import ObjectiveSpec, RunSpec
from sbert.training.trainer import Objective, Trainer

logger = logging.getLogger(__name__)


def run(spec: RunSpec, resume: bool = False) -> dict:
    """Build everything ``spec`` names, train, and return the trainer's summary."""
    import torch

    seed = spec.config.seed
    torch.manual_seed(seed)  # seeds the new weights: a cross-encoder's head, a classification loss's classifier
    model = build_model(spec)
    objectives = [
        Objective(
            objective_examples(o, seed),
            matryoshka(make_loss(o, model, spec.cross_encoder, spec.config.max_seq_length), spec),
            objective_name(i, o, spec),
        )
        for i, o in enumerate(spec.objectives)
    ]
    evaluator = dev_evaluator(spec.dev_format, spec.dev, seed, spec.cross_encoder) if spec.dev else None
    trainer = Trainer(model, objectives, spec.config, spec.out, evaluator=evaluator, device=spec.device)
    return trainer.train(resume=resume)


def build_model(spec: RunSpec):
    """The model ``spec`` trains: its base model as a bi-encoder (with a fresh LoRA adapter where ``spec.lora``
    says), or its transformer under a new cross-encoder head as wide as the objective's labels."""
    if not spec.cross_encoder:
        from sbert.adapters import for_training

        encoder = build_encoder(
            spec.model,
            spec.init,
            spec.pooling,
            spec.config.seed,
            spec.normalize,
            device=spec.device,
            allow_pickle=spec.allow_pickle,
        )
        return for_training(encoder, spec.lora_settings, spec.model, spec.config.seed)
    from sbert.cross_encoder import CrossEncoder

    first = spec.objectives[0]
    labels = _cross(first.objective, OBJECTIVES[first.objective].cross_labels)(first.settings)
    return CrossEncoder.load(spec.model, num_labels=labels, device=spec.device, allow_pickle=spec.allow_pickle)


def objective_examples(objective: ObjectiveSpec, seed: int = 0) -> list:
    """The examples of every training file of ``objective``, of the kind it reads (NLI pairs become
    (premise, entailment, contradiction) triplets for the triplet and mnrl objectives; an in-batch
    objective keeps the scored pairs at or above its ``positive_score``)."""
    examples = [e for path in objective.train for e in read_examples(objective.format, path, objective.kind, seed)]
    floor = objective.settings.get("positive_score", 0.0)
    if objective.kind is not ScoredPair or not floor:
        return examples
    kept = [e for e in examples if e.score >= floor]
    files = ", ".join(objective.train)
    if not kept:
        top = max(e.score for e in examples)
        raise InputFileError(f"{files}: no pair scored at least positive_score {floor:g} (the highest: {top:g})")
    logger.info("%s: %d of %d pairs scored at least %g train as positives", files, len(kept), len(examples), floor)
    return kept


T = TypeVar("T")


def _cross(objective: str, made: T | None) -> T:
    """An objective's cross-encoder part (its loss, its label count), which ``RunSpec`` checked it has."""
    if made is None:
        raise ValueError(f"objective {objective!r} does not train a cross-encoder")
    return made


def make_loss(
    objective: ObjectiveSpec, model, cross_encoder: bool = False, max_seq_length: int | None = None
) -> nn.Module:
    """The loss of ``objective`` (``OBJECTIVES``' entry) for ``model``, a bi-encoder or a cross-encoder; a
    bi-encoder's teacher or guide reads a text no further than the model trains on it (``max_seq_length``,
    the run's cut, where it is below the model's own limit)."""
    kind = OBJECTIVES[objective.objective]
    if cross_encoder:
        return _cross(objective.objective, kind.cross_encoder)(LossInputs(objective.settings, 0, objective.score_range))
    own = getattr(model, "max_seq_length", None)
    length = min(max_seq_length, own) if max_seq_length and own else (max_seq_length or own)
    return kind.bi_encoder(LossInputs(objective.settings, model.model_dim, objective.score_range, model, length))


def matryoshka(loss: nn.Module, spec: RunSpec) -> nn.Module:
    """``loss`` wrapped in a ``MatryoshkaLoss`` over ``spec``'s widths, or as it is where it names none."""
    from sbert.losses.matryoshka import MatryoshkaLoss

    return MatryoshkaLoss(loss, spec.matryoshka_dims) if spec.matryoshka_dims else loss


def objective_name(index: int, objective: ObjectiveSpec, spec: RunSpec) -> str:
    """How the log and the checkpoint name objective ``index`` (a resumed run must name it the same)."""
    cross = "cross-" if spec.cross_encoder else ""
    return f"{index}:{cross}{objective.objective}:{objective.format}"


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
    from sbert.modules import Dense, Module, Normalize, Pooling

    encoder = sbert.load(model, **load_kwargs)
    if normalize is not None:
        modules = [cast(Module, m) for m in encoder if not isinstance(m, Normalize)] + (
            [Normalize()] if normalize else []
        )
        path = encoder.path
        encoder = Encoder(modules, encoder.similarity_fn_name, encoder.truncate_dim, encoder.settings)
        encoder.path = path
    if init == "random":
        encoder.reinitialize_transformer(seed)
    if pooling is not None:
        index = next(i for i, m in enumerate(encoder) if isinstance(m, Pooling))
        old = cast(Pooling, encoder[index])
        new = Pooling(old.word_dim, pooling)
        if new.dim != old.dim and any(isinstance(m, Dense) for m in encoder):
            raise ValueError(
                f"pooling {pooling!r} changes the width from {old.dim} to {new.dim}, "
                "which the model's Dense layer cannot take"
            )
        encoder[index] = new
    return encoder


def finished_message(summary: dict) -> str:
    """What ``sbert train`` says at the end of a run: steps, speed, best dev score, where things went, and
    what a guide dropped."""
    best = f", best dev {summary['best_score']:.2f}" if summary["best_score"] is not None else ""
    kept = (
        f"checkpoint kept at {summary['checkpoint']}"
        if summary.get("checkpoint")
        else "checkpoint removed (--keep-checkpoint keeps it)"
    )
    guided = "".join(
        f"; {name}: {Dropped(**counts)} by the guide" for name, counts in summary.get("guide_dropped", {}).items()
    )
    return (
        f"trained {summary['steps']} steps ({summary['steps_per_second']:.2f} steps/s){best}; "
        f"model saved to {summary['model']}; log in {summary['log']}; {kept}{guided}"
    )


__all__ = ["build_encoder", "build_model", "finished_message", "make_loss", "objective_examples", "run"]
