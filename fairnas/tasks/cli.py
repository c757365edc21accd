"""The commands' shared shell: Hydra entry points, and bad input ending in one clear line and a non-zero exit."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, InstantiationException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from fairnas.config import CONFIG_DIR, composition_error
from fairnas.run_lock import discard_if_unused, release_job_folders
from fairnas.search.trial import TrialsCrashAlike, is_out_of_space
from fairnas.tasks.hydra_files import put_back_hydra_files

FULL_ERROR = "HYDRA_FULL_ERROR"  # set: Hydra raises the errors it would report itself
DATALOADER_WORKER = re.compile(r"Caught \w+ in DataLoader worker process \d+\.$")
USER_ERRORS = (ValueError, FileNotFoundError, OmegaConfBaseException, TrialsCrashAlike)
# Building an object from config: an unknown or missing constructor argument is the config's fault too.
INSTANTIATION_ERRORS = (ValueError, FileNotFoundError, OmegaConfBaseException, TypeError)


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
    except OSError as exc:
        if not is_out_of_space(exc):
            raise
        _fail(f"{_first_line(exc)}; free space and run the same command again: finished work is kept and resumed")


def hydra_command(task: Callable[[DictConfig], Any], config_name: str) -> Callable[[], None]:
    """The console entry point of ``task``: ``@hydra.main`` over the packaged configs, errors via :func:`run_cli`.
    After bad input the run folder is as it was: a new one is removed, an existing one gets Hydra's files back
    (:mod:`fairnas.tasks.hydra_files`), and its lock is released.

    A command line Hydra cannot compose (an unknown key, a missing option) ends in one line too
    (:func:`~fairnas.config.composition_error`) and exit status 2, not Hydra's several lines and status 1: Hydra
    raises such errors while ``HYDRA_FULL_ERROR`` is set, here until the task starts (unless the user set it).
    """
    raising = False  # HYDRA_FULL_ERROR is set here, until the task starts

    @hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name=config_name)
    def main(cfg: DictConfig) -> None:
        nonlocal raising
        if raising:  # composed: the task's own errors are reported as before
            os.environ.pop(FULL_ERROR, None)
            raising = False
        try:
            run_cli(task, cfg)
        except SystemExit:
            put_back_hydra_files()
            _discard_unused_folders(HydraConfig.get(), cfg.get("output_dir"))
            release_job_folders()
            raise

    def entry() -> None:
        nonlocal raising
        if os.environ.get(FULL_ERROR) is not None:  # the user asked for Hydra's own report
            main()
            return
        os.environ[FULL_ERROR], raising = "1", True
        try:
            main()
        except HydraException as error:  # raised before the task started: composing the command line
            _fail(composition_error(error, config_name, [arg for arg in sys.argv[1:] if not arg.startswith("-")]))
        finally:
            if raising:
                os.environ.pop(FULL_ERROR, None)
                raising = False

    return entry


def _discard_unused_folders(hydra_config: DictConfig, output_dir: str | None) -> None:
    """After bad input, remove the run folder Hydra made (and the output folder) if nothing but Hydra's own files
    (``.hydra/``, the job log) and the lock files are in it: a failed start leaves no run behind. A folder with
    results, or one another process holds (:mod:`fairnas.run_lock`), is kept."""
    hydra_files = {hydra_config.output_subdir, f"{hydra_config.job.name}.log"}
    for folder in {Path(hydra_config.runtime.output_dir), *([Path(output_dir)] if output_dir else [])}:
        discard_if_unused(folder, hydra_files)


def _full_key(exc: InstantiationException) -> str:
    for line in str(exc).splitlines():
        if line.startswith("full_key:"):
            return line.removeprefix("full_key:").strip()
    return ""


def _first_line(exc: BaseException) -> str:
    """The error's message; for one re-raised from a DataLoader worker, the original message (its last line)."""
    lines = str(exc).splitlines()
    if not lines:
        return type(exc).__name__
    if DATALOADER_WORKER.match(lines[0]):  # "Caught X in DataLoader worker process 0." + the worker's traceback
        return lines[-1].split(": ", 1)[-1]
    return lines[0]


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
