"""Training one run: the LightningModule, the learning-rate schedules, a config built into a model and its data
(:mod:`~fairnas.training.build`, with ``load_run``, the way back from a checkpoint), ``train(cfg)``
(:mod:`~fairnas.training.run`), the search's training target (:mod:`~fairnas.training.search_target`) and runs
through the search's pool (:mod:`~fairnas.training.run_pool`). The train command is :mod:`fairnas.tasks.train`.

:class:`FaceRecognitionModule` is imported on first use, so that the schedules import without Lightning.
"""

__all__ = ["FaceRecognitionModule"]


def __getattr__(name: str):
    if name == "FaceRecognitionModule":
        from fairnas.training.module import FaceRecognitionModule

        return FaceRecognitionModule
    raise AttributeError(f"module 'fairnas.training' has no attribute {name!r}")
