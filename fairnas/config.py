"""Compose the project's Hydra configs from Python (tests, the search's training target, notebooks)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, open_dict

CONFIG_DIR = Path(__file__).resolve().parents[1] / "conf"


def compose_config(
    config_name: str = "train", overrides: Sequence[str] = (), output_dir: str | Path | None = None
) -> DictConfig:
    """The config ``python <config_name>.py <overrides>`` would run, with ``output_dir`` set when given.

    Outside a Hydra run there is no Hydra run directory, so callers that train pass ``output_dir``. Inside a
    ``@hydra.main`` application (e.g. ``search.py`` composing its trials) the running application's config
    search path, which is this ``conf/`` directory, is used.
    """
    if GlobalHydra.instance().is_initialized():
        cfg = compose(config_name=config_name, overrides=list(overrides))
    else:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=list(overrides))
    if output_dir is not None:
        with open_dict(cfg):
            cfg.output_dir = str(output_dir)
    return cfg
