"""Audit a trained checkpoint for robustness bias: ``python audit.py ckpt=<run>/checkpoints/last.ckpt [overrides]``."""

import hydra
from omegaconf import DictConfig

from fairnas.cli import run_cli
from fairnas.robustness.audit import audit


@hydra.main(version_base="1.3", config_path="conf", config_name="audit")
def main(cfg: DictConfig) -> None:
    run_cli(audit, cfg)


if __name__ == "__main__":
    main()
