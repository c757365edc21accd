"""Analytic multi-fidelity multi-objective targets for testing and benchmarking the search.

ZDT1 (2 objectives) or DTLZ2 (any number of objectives) from pymoo, observed through noise whose
standard deviation shrinks as ``noise / budget``: low budgets are cheap but unreliable, like short
training runs. The noise is seeded by (config, seed, budget), so a trial always returns the same values.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
from ConfigSpace import ConfigurationSpace, Float
from pymoo.problems import get_problem

from fairnas.search import config_id


class NoisyMultiFidelityProblem:
    """Callable target ``(config, seed, budget) -> {objective: value}`` over ``x0 .. x{n-1}`` in [0, 1]."""

    def __init__(self, problem: str = "zdt1", *, n_variables: int = 4, n_objectives: int = 2, noise: float = 0.3):
        if problem not in ("zdt1", "dtlz2"):
            raise ValueError(f"unknown problem {problem!r}; allowed: ['zdt1', 'dtlz2']")
        if problem == "zdt1" and n_objectives != 2:
            raise ValueError(f"zdt1 has 2 objectives, got n_objectives={n_objectives}")
        if n_variables < n_objectives:
            raise ValueError(f"n_variables must be >= n_objectives ({n_objectives}), got {n_variables}")
        kwargs = {"n_obj": n_objectives} if problem == "dtlz2" else {}
        self.problem = get_problem(problem, n_var=n_variables, **kwargs)
        self.objectives = tuple(f"f{i}" for i in range(1, n_objectives + 1))
        self.noise = noise

    def configspace(self, seed: int | None = None) -> ConfigurationSpace:
        """The continuous box [0, 1]^n as a ConfigurationSpace."""
        space = ConfigurationSpace(name=self.problem.name(), seed=seed)
        space.add([Float(f"x{i}", (0.0, 1.0)) for i in range(self.problem.n_var)])
        return space

    def true_values(self, config: dict[str, Any]) -> np.ndarray:
        """Noise-free objective values of a configuration."""
        x = np.array([[config[f"x{i}"] for i in range(self.problem.n_var)]], dtype=float)
        return self.problem.evaluate(x)[0]

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> dict[str, float]:
        stream = zlib.crc32(f"{config_id(config)}|{seed}|{budget!r}".encode())
        noise = np.random.default_rng(stream).normal(0.0, self.noise / budget, size=len(self.objectives))
        return dict(zip(self.objectives, map(float, self.true_values(config) + np.abs(noise)), strict=True))
