"""Fine-tuning: the training loop, its schedule and its checkpoints."""

from sbert.training.trainer import Objective, TrainConfig, Trainer

__all__ = ["Objective", "TrainConfig", "Trainer"]
