"""``adapt``: fit a model to a corpus from its documents alone, through the ordinary trainer."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from sbert.adapt.documents import read_adapt_documents
from sbert.adapt.methods import DEFAULT_METHOD, method
from sbert.adapt.pseudo_queries import pseudo_queries


@dataclass(frozen=True)
class AdaptSettings:
    """How ``adapt`` trains: the method, at most ``steps`` steps of ``batch_size`` pairs, AdamW at ``lr``
    with 10% warm-up, in-batch negatives at ``scale``. ``steps`` bounds the time: on 2 CPU cores the
    default model takes a few seconds a step at batch 32 on ~100-word documents."""

    method: str = DEFAULT_METHOD
    steps: int = 150
    batch_size: int = 32
    lr: float = 2e-5
    scale: float = 20.0
    seed: int = 42
    checkpoint_every: int = 25


def adapt(
    model: str | Path,
    corpus: str | Path,
    out: str | Path,
    settings: AdaptSettings = AdaptSettings(),
    *,
    resume: bool = False,
    device: str | None = None,
    progress: bool | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> dict:
    """Train ``model`` on pseudo-queries from ``corpus``'s documents and save it to ``out`` (a
    sentence-transformers folder); returns the trainer's summary plus what was read and made.

    Ctrl-C or SIGTERM saves a checkpoint in ``<out>.train`` and raises ``TrainingInterrupted``; the same
    call with ``resume=True`` goes on from it (the pairs are drawn again, identically, from the seed).
    ``on_step(step, loss)`` is called after each step.
    """
    from sbert.losses.in_batch import MultipleNegativesRankingLoss
    from sbert.training.recipe import build_encoder
    from sbert.training.trainer import Objective, TrainConfig, Trainer

    chosen = method(settings.method)
    documents, source = read_adapt_documents(corpus)
    pairs = pseudo_queries(documents, chosen.generators, settings.seed)
    if not pairs:
        raise ValueError(f"{source}: no document gave a pseudo-query for method {settings.method!r}")
    encoder = build_encoder(str(model), seed=settings.seed, device=device)
    config = TrainConfig(
        batch_size=settings.batch_size,
        lr=settings.lr,
        seed=settings.seed,
        max_steps=settings.steps,
        epochs=max(1, -(-settings.steps * settings.batch_size // len(pairs))),
        checkpoint_every=settings.checkpoint_every,
        progress=progress,
    )
    objective = Objective(pairs, MultipleNegativesRankingLoss(settings.scale), f"adapt:{settings.method}")
    trainer = Trainer(encoder, [objective], config, out, device=device)
    trainer.run_dir.mkdir(parents=True, exist_ok=True)
    record = {"base_model": str(model), "corpus": str(source), "documents": len(documents), "pairs": len(pairs)}
    (trainer.run_dir / "adapt.json").write_text(json.dumps({**record, **asdict(settings)}, indent=2) + "\n")
    summary = trainer.train(resume=resume, on_step=on_step)
    return {**summary, **record}
