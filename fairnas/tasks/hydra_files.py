"""A refused command leaves an existing run folder as it found it, Hydra's own files included.

Hydra writes ``.hydra/`` (config.yaml, hydra.yaml, overrides.yaml) and appends to the job log before the command
checks its settings: a resume refused for changed settings would leave config.yaml recording the settings that did
not run. :class:`RecordHydraFiles` records those files before Hydra writes them; after bad input
:func:`put_back_hydra_files` restores them, unless the command wrote something else in the folder (a run that did work,
then failed, keeps its log and the config it ran with).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from fairnas.run_lock import LOCK_FILES

HYDRA_CONFIGS = ("config.yaml", "hydra.yaml", "overrides.yaml")
"""What Hydra writes into ``<run folder>/<hydra.output_subdir>/``."""


@dataclasses.dataclass(frozen=True)
class FolderBefore:
    """A run folder before Hydra wrote into it: the bytes of Hydra's files (None: absent) and the size and
    modification time of every other file (the lock files aside: a run holds them)."""

    hydra_files: dict[Path, bytes | None]
    others: dict[Path, tuple[int, int]]

    @classmethod
    def of(cls, folder: Path, hydra_names: list[str]) -> FolderBefore:
        hydra_files = {folder / name: _bytes(folder / name) for name in hydra_names}
        return cls(hydra_files, _stamps(folder, set(hydra_files)))

    def put_back(self, folder: Path) -> None:
        """Hydra's files as they were, if every other file is."""
        if _stamps(folder, set(self.hydra_files)) != self.others:
            return
        for path, content in self.hydra_files.items():
            if content is not None:
                path.write_bytes(content)
            elif path.is_file():
                path.unlink()
                if path.parent != folder and not any(path.parent.iterdir()):
                    path.parent.rmdir()  # .hydra/, made by this run


_RECORDED: dict[Path, FolderBefore] = {}


class RecordHydraFiles(Callback):
    """Hydra callback: records an existing run folder before Hydra writes its files there (:class:`FolderBefore`)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = Path(str(OmegaConf.select(config, "hydra.run.dir"))).resolve()
        if not folder.is_dir():  # a new folder: a refused command removes it whole (fairnas.tasks.cli)
            return
        hydra = config.hydra
        names = [f"{hydra.job.name}.log"]
        if hydra.output_subdir is not None:
            names += [f"{hydra.output_subdir}/{name}" for name in HYDRA_CONFIGS]
        _RECORDED[folder] = FolderBefore.of(folder, names)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        _RECORDED.clear()  # the run was accepted; a refused one never gets here (it ends in SystemExit)


def put_back_hydra_files() -> None:
    """After bad input: every recorded run folder's Hydra files as they were before the command (if it wrote nothing
    else there)."""
    while _RECORDED:
        folder, before = _RECORDED.popitem()
        before.put_back(folder)


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _stamps(folder: Path, skipped: set[Path]) -> dict[Path, tuple[int, int]]:
    """Size and modification time of every file under ``folder`` but ``skipped`` and the lock files."""
    stamps = {}
    for path in folder.rglob("*"):
        if path.is_file() and path not in skipped and path.name not in LOCK_FILES:
            status = path.stat()
            stamps[path] = (status.st_size, status.st_mtime_ns)
    return stamps
