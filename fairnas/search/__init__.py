"""Multi-fidelity, multi-objective architecture and hyperparameter search (thesis Sec. 4.4).

Face-agnostic: the search only sees a target ``(config, seed, budget) -> {objective: value}``.
"""

from fairnas.search.hypervolume import hypervolume
from fairnas.search.loop import run_search
from fairnas.search.outputs import SearchResult
from fairnas.search.pareto import non_dominated_mask, pareto_front
from fairnas.search.settings import SearchSettings
from fairnas.search.space import SearchSpace, config_to_overrides, load_space
from fairnas.search.trial import config_id

__all__ = [
    "SearchResult",
    "SearchSettings",
    "SearchSpace",
    "config_id",
    "config_to_overrides",
    "hypervolume",
    "load_space",
    "non_dominated_mask",
    "pareto_front",
    "run_search",
]
