"""Compare bias mitigations across models (thesis Tables 4.4/4.6): ``python compare.py [hydra overrides]``."""

import hydra
from omegaconf import DictConfig

from fairnas.cli import run_cli
from fairnas.mitigations.compare import run_comparison


@hydra.main(version_base="1.3", config_path="conf", config_name="compare")
def main(cfg: DictConfig) -> None:
    run_cli(run_comparison, cfg)


if __name__ == "__main__":
    main()
