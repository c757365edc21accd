"""Search architectures and hyperparameters for the error-vs-fairness Pareto front: ``python search.py``."""

import hydra
from omegaconf import DictConfig

from fairnas.cli import run_cli
from fairnas.training.search_task import run_face_search


@hydra.main(version_base="1.3", config_path="conf", config_name="search")
def main(cfg: DictConfig) -> None:
    run_cli(run_face_search, cfg)


if __name__ == "__main__":
    main()
