"""Training: the LightningModule, learning-rate schedules and the ``train(cfg)`` entry point."""

from fairnas.training.train import train

__all__ = ["train"]
