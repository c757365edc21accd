"""Transfer evaluation of face embeddings on verification benchmarks (run by :mod:`fairnas.tasks.evaluate`)."""

from fairnas.evaluation.all_metrics import BenchmarkResult, evaluate_benchmark
from fairnas.evaluation.embeddings import embed_images

__all__ = ["BenchmarkResult", "embed_images", "evaluate_benchmark"]
