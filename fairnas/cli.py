"""Shared behaviour of the command-line entry points: bad input ends in one clear line and a non-zero exit."""

from __future__ import annotations

import sys
from typing import Any, Callable

from hydra.errors import InstantiationException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

USER_ERRORS = (ValueError, FileNotFoundError, OmegaConfBaseException)


def run_cli(task: Callable[[DictConfig], Any], cfg: DictConfig) -> Any:
    """Run ``task(cfg)``; a configuration or data error prints ``error: <message>`` and exits with status 2."""
    try:
        return task(cfg)
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, USER_ERRORS):
            _fail(cause)
        raise
    except USER_ERRORS as exc:
        _fail(exc)


def _fail(exc: BaseException) -> None:
    message = str(exc)
    print(f"error: {message.splitlines()[0] if message else type(exc).__name__}", file=sys.stderr)
    sys.exit(2)
