"""``search.strategy=moasha``: MO-ASHA, asynchronous successive halving over the objectives' non-dominated sorting
(:mod:`~fairnas.search.strategies.moasha.strategy`). It has no options of its own: its rungs are min_budget * eta^k.

Syne Tune is an optional extra (``pip install -e '.[moasha]'``), imported when a search builds the strategy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ConfigSpace import ConfigurationSpace

from fairnas.search.strategies.base import BuildContext, Registration, Strategy, register

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings


def build(configspace: ConfigurationSpace, settings: SearchSettings, context: BuildContext) -> Strategy:
    from fairnas.search.strategies.moasha.strategy import MoashaStrategy  # Syne Tune is an optional extra

    return MoashaStrategy(configspace, settings)


register(Registration("moasha", build, multi_fidelity=True, requires=f"{__name__}.strategy", title="Syne Tune MO-ASHA"))
