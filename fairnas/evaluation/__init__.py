"""Transfer evaluation of trained checkpoints on verification benchmarks, RFW fairness and linear probes."""

from fairnas.evaluation.checkpoint import TrainedModel, load_trained_model
from fairnas.evaluation.embeddings import embed_images
from fairnas.evaluation.transfer import evaluate

__all__ = ["TrainedModel", "embed_images", "evaluate", "load_trained_model"]
