"""Where the configs and search spaces live, and composing a command's Hydra config from Python.

A source checkout (``pip install -e .``) reads the repository's ``conf/`` and ``searchspaces/``; an installed
wheel carries them inside the package (``fairnas/conf``, ``fairnas/searchspaces``), so the console scripts work
from any directory.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigKeyError

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


def composition_error(error: HydraException, config_name: str, overrides: Sequence[str]) -> str:
    """One line for a config Hydra cannot compose from ``overrides``. An override of a key that does not exist names
    the keys it may have meant (:func:`similar_keys`), e.g. ``study.alpha is not a setting; did you mean
    study.claims.alpha?``; any other error is Hydra's message on one line."""
    cause = error.__cause__
    if not (isinstance(cause, ConfigKeyError | AttributeError) and "not in struct" in str(cause)):
        text = str(error).split("\nConfig search path:")[0]  # (a missing option: Hydra's search path follows)
        return " ".join(line.strip() for line in text.splitlines() if line.strip())
    key = str(getattr(cause, "full_key", ""))
    others = [item for item in overrides if item.lstrip("+~").split("=", 1)[0] != key]
    meant = similar_keys(key, _composed_or_none(config_name, others) or _composed_or_none(config_name, []))
    if meant:
        return f"{key} is not a setting; did you mean {' or '.join(meant)}?"
    return f"{key} is not a setting; to add it, prefix the override with + (+{key}=...)"


def similar_keys(key: str, cfg: DictConfig | None) -> list[str]:
    """The keys of ``cfg`` that ``key`` may mean: those with the same last name nearest to it (most leading names
    shared), else the closest spellings."""
    if cfg is None:
        return []
    keys = list(_dotted_keys(OmegaConf.to_container(cfg, resolve=False)))
    parts = key.split(".")
    same_name = [candidate for candidate in keys if candidate.split(".")[-1] == parts[-1]]
    if not same_name:
        return difflib.get_close_matches(key, keys, n=3, cutoff=0.85)
    shared = {candidate: _shared_prefix(candidate.split("."), parts) for candidate in same_name}
    return [candidate for candidate in same_name if shared[candidate] == max(shared.values())]


def _composed_or_none(config_name: str, overrides: Sequence[str]) -> DictConfig | None:
    try:
        return compose_config(config_name, overrides)
    except HydraException:
        return None


def _dotted_keys(node: object, prefix: str = "") -> Iterator[str]:
    """Every key of a nested mapping as a dotted path (lists are values, not descended into)."""
    if isinstance(node, Mapping):
        for name, value in node.items():
            path = f"{prefix}{name}"
            yield path
            yield from _dotted_keys(value, f"{path}.")


def _shared_prefix(a: list[str], b: list[str]) -> int:
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared


def resolve_space_path(space: str | Path) -> Path:
    """A search-space file as given, or by its path in the project (``searchspaces/dpn_paper.yaml``)."""
    path = Path(space).expanduser()
    if not path.is_file() and path.parts and path.parts[0] == SPACES_DIR.name:
        path = SPACES_DIR.joinpath(*path.parts[1:])
    if not path.is_file():
        raise FileNotFoundError(f"search.space: space file '{space}' does not exist")
    return path
