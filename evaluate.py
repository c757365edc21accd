"""Transfer-evaluate trained checkpoints: ``python evaluate.py ckpt=<run>/checkpoints/last.ckpt [overrides]``."""

import hydra
from omegaconf import DictConfig

from fairnas.cli import run_cli
from fairnas.evaluation import evaluate


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    run_cli(evaluate, cfg)


if __name__ == "__main__":
    main()
