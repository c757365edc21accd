"""Search strategies (``search.strategy``) behind one ask/tell contract, found by name in a registry
(:mod:`~fairnas.search.strategies.base`).

Every other module (or package) here registers one strategy when imported, and importing this package imports
them all; a strategy's optional library is imported only when a search builds it. docs/search_strategies.md
describes them; CONTRIBUTING.md, "Adding a search strategy", how to add one.
"""

import importlib
import pkgutil

from fairnas.search.strategies.base import (
    REGISTRY,
    BuildContext,
    Proposal,
    Registration,
    Strategy,
    register,
    registration,
)

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "BuildContext", "Proposal", "Registration", "Strategy", "register", "registration"]
