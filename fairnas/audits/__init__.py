"""Audits of trained models: why, and under which conditions, a group is served worse.

Every audit is a module with ``audit(model, data, config) -> AuditResult`` that ends with
``register(Audit(name, question, audit, check=..., splits=...))`` (:mod:`fairnas.audits.base`); importing this
package imports every module of it, so :data:`AUDITS` holds every audit (a module that registers none, such as
``gallery`` or ``statistics``, holds what several share). docs/audits.md describes them; CONTRIBUTING.md, "An audit",
how to add one.
"""

import importlib
import pkgutil

from fairnas.audits.base import AUDITS, Audit, check_audits, chosen_audits, register

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["AUDITS", "Audit", "check_audits", "chosen_audits", "register"]
