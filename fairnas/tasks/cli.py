"""The commands' shared shell: Hydra entry points, and bad input ending in one clear line and a non-zero exit."""

from __future__ import annotations

import sys
from typing import Any, Callable

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from fairnas.config import CONFIG_DIR

USER_ERRORS = (ValueError, FileNotFoundError, OmegaConfBaseException)
# Building an object from config: an unknown or missing constructor argument is the config's fault too.
INSTANTIATION_ERRORS = (*USER_ERRORS, TypeError)


def run_cli(task: Callable[[DictConfig], Any], cfg: DictConfig) -> Any:
    """Run ``task(cfg)``; a configuration or data error prints ``error: <message>`` and exits with status 2.

    An error raised while Hydra builds an object from config (an unknown or mistyped argument included) names
    the config node it came from.
    """
    try:
        return task(cfg)
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, INSTANTIATION_ERRORS):
            node, message = _full_key(exc), _first_line(cause)
            _fail(message if message.startswith(node) else f"{node}: {message}")
        raise
    except USER_ERRORS as exc:
        _fail(_first_line(exc))


def hydra_command(task: Callable[[DictConfig], Any], config_name: str) -> Callable[[], None]:
    """The console entry point of ``task``: ``@hydra.main`` over the packaged configs, errors via :func:`run_cli`."""

    @hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name=config_name)
    def main(cfg: DictConfig) -> None:
        run_cli(task, cfg)

    return main


def _full_key(exc: InstantiationException) -> str:
    for line in str(exc).splitlines():
        if line.startswith("full_key:"):
            return line.removeprefix("full_key:").strip()
    return ""


def _first_line(exc: BaseException) -> str:
    message = str(exc)
    return message.splitlines()[0] if message else type(exc).__name__


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
