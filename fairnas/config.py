"""Where the configs and search spaces live, and composing a command's Hydra config from Python.

A source checkout (``pip install -e .``) reads the repository's ``conf/`` and ``searchspaces/``; an installed
wheel carries them inside the package (``fairnas/conf``, ``fairnas/searchspaces``), so the console scripts work
from any directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, open_dict

PACKAGE_DIR = Path(__file__).resolve().parent


def _resource(name: str) -> Path:
    """``name`` shipped inside the installed package, else the source checkout's top-level folder."""
    packaged = PACKAGE_DIR / name
    return packaged if packaged.is_dir() else PACKAGE_DIR.parent / name


CONFIG_DIR = _resource("conf")
SPACES_DIR = _resource("searchspaces")


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


def resolve_space_path(space: str | Path) -> Path:
    """A search-space file as given, or by its path in the project (``searchspaces/dpn_paper.yaml``)."""
    path = Path(space).expanduser()
    if not path.is_file() and path.parts and path.parts[0] == SPACES_DIR.name:
        path = SPACES_DIR.joinpath(*path.parts[1:])
    if not path.is_file():
        raise FileNotFoundError(f"search.space: space file '{space}' does not exist")
    return path
