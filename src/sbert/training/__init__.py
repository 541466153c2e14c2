"""Fine-tuning: the training loop, its schedule and its checkpoints."""

from sbert.training.trainer import Objective, TrainConfig, Trainer, TrainingInterrupted

__all__ = ["Objective", "TrainConfig", "Trainer", "TrainingInterrupted"]
