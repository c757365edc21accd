"""Training building blocks: the LightningModule and the learning-rate schedules (run by :mod:`fairnas.tasks.train`).

:class:`FaceRecognitionModule` is imported on first use, so that the schedules import without Lightning.
"""

__all__ = ["FaceRecognitionModule"]


def __getattr__(name: str):
    if name == "FaceRecognitionModule":
        from fairnas.training.module import FaceRecognitionModule

        return FaceRecognitionModule
    raise AttributeError(f"module 'fairnas.training' has no attribute {name!r}")
