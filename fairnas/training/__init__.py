"""Training building blocks: the LightningModule and the learning-rate schedules (run by :mod:`fairnas.tasks.train`)."""

from fairnas.training.module import FaceRecognitionModule

__all__ = ["FaceRecognitionModule"]
