"""The paper's training recipe, and the reference implementation (sentence-transformers) driven the way
sbert is, for side-by-side rows.

Only benchmarks import this; sbert itself never imports sentence-transformers.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sbert.data.examples import LabeledPair, ScoredPair
from sbert.training import TrainConfig


def paper_recipe(epochs: int, seed: int = 42, max_steps: int | None = None) -> TrainConfig:
    """The paper's training recipe (TrainConfig's defaults: batch 16, lr 2e-5, 10% warm-up), quiet and
    without checkpoints, as every benchmark trains (``st_train`` maps it onto sentence-transformers')."""
    return TrainConfig(epochs=epochs, seed=seed, max_steps=max_steps, checkpoint_every=None, progress=False)


class STEncoder:
    """A SentenceTransformer seen through sbert's ``encode`` calling convention (for sbert's evaluators)."""

    def __init__(self, path: str | Path) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(path), device="cpu")
        self.path = Path(path)

    def encode(self, texts, batch_size: int = 32, **_ignored) -> np.ndarray:
        single = isinstance(texts, str)
        out = self.model.encode([texts] if single else list(texts), batch_size=batch_size, convert_to_numpy=True)
        return out[0] if single else out


def _losses():
    try:
        from sentence_transformers.sentence_transformer import losses
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers import losses
    return losses


def st_train(
    start: str | Path,
    examples: Sequence[ScoredPair | LabeledPair],
    objective: str,
    config: TrainConfig,
    out: Path,
    pooling: str | None = None,
    concat: str = "u,v,|u-v|",
    score_range: tuple[float, float] = (0.0, 5.0),
) -> dict:
    """Train with SentenceTransformerTrainer from the model folder ``start``; save to ``out``.

    ``objective``: "classification" (SoftmaxLoss, 3 labels, ``concat`` among the paper's modes) or
    "regression" (CosineSimilarityLoss on scores scaled to [0, 1]). Returns steps, seconds, steps/s.
    """
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments

    model = SentenceTransformer(str(start), device="cpu")
    if pooling is not None:
        _set_pooling(model, pooling)
    losses = _losses()
    if objective == "classification":
        parts = concat.replace(" ", "").strip("()").split(",")
        if ("u" in parts) != ("v" in parts):
            raise ValueError(f"sentence-transformers' SoftmaxLoss cannot express {concat!r}")
        loss = losses.SoftmaxLoss(
            model,
            sentence_embedding_dimension=_dimension(model),
            num_labels=3,
            concatenation_sent_rep="u" in parts,
            concatenation_sent_difference="|u-v|" in parts,
            concatenation_sent_multiplication="u*v" in parts,
        )
    else:
        loss = losses.CosineSimilarityLoss(model)
    columns = _columns(examples, objective, score_range, score_column="score")
    args = SentenceTransformerTrainingArguments(**_recipe_args(config, out))
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=Dataset.from_dict(columns), loss=loss)
    return _run(trainer, model, out)


def _columns(examples, objective: str, score_range: tuple[float, float], score_column: str) -> dict:
    """Dataset columns: the pairs, and the label (classification) or the score scaled to [0, 1]."""
    columns = {"sentence1": [e.sentence1 for e in examples], "sentence2": [e.sentence2 for e in examples]}
    if objective == "classification":
        columns["label"] = [e.label for e in examples]
    else:
        low, high = score_range
        columns[score_column] = [(e.score - low) / (high - low) for e in examples]
    return columns


def _recipe_args(config: TrainConfig, out: Path) -> dict:
    """The paper's recipe (``config``) as Hugging Face training arguments."""
    return {
        "output_dir": str(out.with_name(out.name + ".st-trainer")),
        "num_train_epochs": config.epochs,
        "max_steps": config.max_steps or -1,
        "per_device_train_batch_size": config.batch_size,
        "learning_rate": config.lr,
        "warmup_steps": config.warmup,  # a float below 1 is a ratio of the steps
        "lr_scheduler_type": "linear",
        "weight_decay": config.weight_decay,
        "max_grad_norm": config.max_grad_norm,
        "seed": config.seed,
        "save_strategy": "no",
        "report_to": [],
        "disable_tqdm": True,
        "use_cpu": True,
    }


def _run(trainer, model, out: Path) -> dict:
    began = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - began
    model.save(str(out))
    return {"steps": result.global_step, "seconds": seconds, "steps_per_second": result.global_step / seconds}


class STCrossEncoder:
    """sentence-transformers' CrossEncoder seen through sbert's ``predict`` (for sbert's STS evaluator)."""

    def __init__(self, path: str | Path) -> None:
        from sentence_transformers.cross_encoder import CrossEncoder

        self.model = CrossEncoder(str(path), device="cpu")
        self.path = Path(path)

    def predict(self, pairs, batch_size: int = 32, **_ignored) -> np.ndarray:
        return np.asarray(self.model.predict(list(pairs), batch_size=batch_size, show_progress_bar=False))


def st_train_cross(
    start: str | Path,
    examples: Sequence[ScoredPair | LabeledPair],
    objective: str,
    config: TrainConfig,
    out: Path,
    score_range: tuple[float, float] = (0.0, 5.0),
) -> dict:
    """Train sentence-transformers' CrossEncoder with its CrossEncoderTrainer from the folder ``start``.

    "regression": BinaryCrossEntropyLoss on scores scaled to [0, 1] (one label); "classification":
    CrossEntropyLoss over the folder's labels. Saves to ``out``; returns steps, seconds, steps/s.
    """
    from datasets import Dataset
    from sentence_transformers.cross_encoder import (
        CrossEncoder,
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
        losses,
    )

    model = CrossEncoder(str(start), device="cpu")
    classify = objective == "classification"
    loss = losses.CrossEntropyLoss(model) if classify else losses.BinaryCrossEntropyLoss(model)
    columns = _columns(examples, objective, score_range, score_column="label")
    args = CrossEncoderTrainingArguments(**_recipe_args(config, out))
    trainer = CrossEncoderTrainer(model=model, args=args, train_dataset=Dataset.from_dict(columns), loss=loss)
    return _run(trainer, model, out)


def _dimension(model) -> int:
    for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):  # 6.x, older
        if hasattr(model, name):
            return getattr(model, name)()
    raise AttributeError("cannot read the embedding dimension of this SentenceTransformer")


def _set_pooling(model, mode: str) -> None:
    """Swap the Pooling module of a SentenceTransformer for one with ``mode``."""
    for index, module in enumerate(model):
        if type(module).__name__ == "Pooling":
            pooling_cls = type(module)
            dim = model[0].get_embedding_dimension()
            model._modules[str(index)] = pooling_cls(dim, pooling_mode=mode)
            return
    raise ValueError("no Pooling module to replace")
