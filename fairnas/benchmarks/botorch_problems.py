"""BoTorch's multi-objective multi-fidelity test problems as search targets: ``MOMFBraninCurrin`` (2 inputs) and
``MOMFPark`` (4 inputs), from Irshad et al. 2021, "Expected hypervolume improvement for simultaneous multi-objective
and multi-fidelity optimization" (arXiv:2112.13901), as BoTorch cites them.

BoTorch's convention: ``problem(negate=True)`` is maximised, its hypervolume taken above ``ref_point`` (0, 0), and
the last input is the fidelity s in [0, 1] (1 the target fidelity). Here every objective is minimised, so a target
returns the negation of BoTorch's maximised values and the reference point is ``-ref_point``. A budget b in
[min_budget, max_budget] epochs is the fidelity s = (b - min_budget) / (max_budget - min_budget) (``linear_from_min``,
the lowest budget at s = 0), or s = b / max_budget (``share_of_max``: budgets 1, 2, 4, 8 of 8 are s = 1/8, 1/4, 1/2,
1; the protocol the plain BoTorch loop of ``bench/comparison/reference_loop.py`` was first measured with). The
other inputs are searched as floats in their bounds. The problems are deterministic: the seed changes only the search.

BoTorch's ``max_hv`` is not exactly the hypervolume of the target-fidelity front: NSGA-II on s = 1 (400 x 300
generations) reaches 0.962 of it on Branin-Currin (whose low-fidelity fronts are larger) and 1.046 of it on Park.
"""

from __future__ import annotations

from typing import Any

import torch
from ConfigSpace import ConfigurationSpace, Float

try:
    from botorch.test_functions.base import MultiObjectiveTestProblem
    from botorch.test_functions.multi_objective_multi_fidelity import MOMFBraninCurrin, MOMFPark
except ImportError as error:
    raise ImportError("BoTorch's test problems need BoTorch: pip install -e '.[botorch]'") from error

PROBLEMS = {"momf_branin_currin": MOMFBraninCurrin, "momf_park": MOMFPark}
FIDELITY_MAPPINGS = ("linear_from_min", "share_of_max")


class MomfTarget:
    """Callable target ``(config, seed, budget) -> {f1, f2}`` (minimised) over inputs ``x0 .. x{d-2}``."""

    def __init__(self, name: str, *, min_budget: float, max_budget: float, fidelity_mapping: str = "linear_from_min"):
        if name not in PROBLEMS:
            raise ValueError(f"unknown BoTorch problem {name!r}; allowed: {list(PROBLEMS)}")
        if not min_budget < max_budget:
            raise ValueError(f"need min_budget < max_budget, got {min_budget} and {max_budget}")
        if fidelity_mapping not in FIDELITY_MAPPINGS:
            raise ValueError(f"unknown fidelity mapping {fidelity_mapping!r}; allowed: {list(FIDELITY_MAPPINGS)}")
        self.fidelity_mapping = fidelity_mapping
        self.problem: MultiObjectiveTestProblem = PROBLEMS[name](negate=True)
        self.objectives = tuple(f"f{i}" for i in range(1, self.problem.num_objectives + 1))
        self.reference_point = tuple(float(-value) for value in self.problem.ref_point)
        self.max_hypervolume = float(self.problem.max_hv)
        self.min_budget, self.max_budget = float(min_budget), float(max_budget)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The searched inputs: every input of the problem but the fidelity (its last)."""
        return tuple(f"x{i}" for i in range(self.problem.dim - 1))

    def configspace(self) -> ConfigurationSpace:
        """The inputs as floats within the problem's bounds."""
        lower, upper = self.problem.bounds.tolist()
        space = ConfigurationSpace(name=type(self.problem).__name__)
        space.add([Float(name, (lower[i], upper[i])) for i, name in enumerate(self.inputs)])
        return space

    def fidelity(self, budget: float) -> float:
        """BoTorch's fidelity input of a budget: linear from 0 at min_budget to 1 at max_budget
        (``linear_from_min``), or budget / max_budget (``share_of_max``)."""
        if self.fidelity_mapping == "share_of_max":
            return float(budget) / self.max_budget
        return (float(budget) - self.min_budget) / (self.max_budget - self.min_budget)

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> dict[str, float]:
        x = torch.tensor([[*(config[name] for name in self.inputs), self.fidelity(budget)]], dtype=torch.double)
        values = -self.problem(x, noise=False)[0]
        return dict(zip(self.objectives, map(float, values), strict=True))
