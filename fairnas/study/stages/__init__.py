"""The study's stages (thesis Chapter 4), one module each, registered in their order
(:mod:`~fairnas.study.stages.base`): each a function from the study's context to its part of the report
(:class:`~fairnas.study.report.StageReport`), with its prerequisite, its settings check, its tables and its claims.

Every other module here registers one stage when imported (``shared`` holds what several use), and importing this
package imports them all. docs/study.md describes them; CONTRIBUTING.md, "A study stage", how to add one.
"""

import importlib
import pkgutil

from fairnas.study.stages.base import STAGES, Stage, check_stages, register, run_stage

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in ("base", "shared"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["STAGES", "Stage", "check_stages", "register", "run_stage"]
