"""Train one face-identification model: ``python train.py [hydra overrides]`` (see README)."""

import hydra
from omegaconf import DictConfig

from fairnas.cli import run_cli
from fairnas.training import train


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> None:
    run_cli(train, cfg)


if __name__ == "__main__":
    main()
