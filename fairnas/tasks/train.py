"""``python train.py`` / ``fairnas-train``: train and evaluate one model from a composed config
(:func:`fairnas.training.run.train`), and write its ``metrics.json``."""

from fairnas.tasks.cli import hydra_command
from fairnas.training.run import train

main = hydra_command(train, "train")
