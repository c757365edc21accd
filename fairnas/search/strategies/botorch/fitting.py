"""What the Gaussian process of ``search.strategy=botorch`` is fitted on, and when its hyperparameters are fitted.

**The data** (:class:`ModelData`). The trials the fidelity policy admits, measured ones and, with ``crashed: worst``,
crashed ones at the worst value measured per objective (the model learns to avoid what crashes, e.g. out-of-memory
architectures; ``exclude``: left out), at most ``search.botorch.max_observations`` of them: half the best by
non-dominated sorting, half the most recent of the rest. Their input and target rows, and those of the pending
trials, are the policy's.

**The fit** (:class:`ModelFit`). The hyperparameters are fitted at every ``search.botorch.refit_every``-th
suggestion of the model (and at the first after a start or resume), and kept in between while the model takes in
the new trials.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from fairnas.search.encoding import SpaceEncoding
from fairnas.search.strategies.base import Proposal
from fairnas.search.strategies.botorch import model as gp
from fairnas.search.strategies.botorch.fidelity import FidelityPolicy
from fairnas.search.strategies.botorch.trials import Observation


def capped(observations: Sequence[Observation], cap: int | None) -> list[Observation]:
    """At most ``cap`` of ``observations`` (None: all): half the best by non-dominated sorting (ties: the most
    recent), then the most recent of the rest; in the order they were told."""
    if cap is None or len(observations) <= cap:
        return list(observations)
    values = np.array([o.values for o in observations], dtype=float)
    _, rank = NonDominatedSorting().do(values, return_rank=True)
    by_rank = sorted(range(len(observations)), key=lambda i: (rank[i], -observations[i].order))
    kept = set(by_rank[: cap // 2])
    recent = sorted(set(range(len(observations))) - kept, key=lambda i: -observations[i].order)
    kept |= set(recent[: cap - len(kept)])
    return [observations[i] for i in sorted(kept)]


class ModelData:
    """The Gaussian process's training data and pending inputs under ``policy``; ``crashed`` and
    ``max_observations`` as in ``search.botorch``."""

    def __init__(self, policy: FidelityPolicy, encoding: SpaceEncoding, crashed: str, max_observations: int | None):
        self._policy = policy
        self._encoding = encoding
        self._crashed = crashed
        self._max_observations = max_observations

    def observations(self, told: Iterable[Observation]) -> list[Observation]:
        """The trials the model is fitted on, each with values (a crashed one's the worst measured)."""
        observations = self._policy.model_observations(told)
        measured = [o for o in observations if o.values is not None]
        if self._crashed == "worst" and measured:
            worst = tuple(np.max([o.values for o in measured if o.values is not None], axis=0).tolist())
            observations = [o if o.values is not None else dataclasses.replace(o, values=worst) for o in observations]
        else:
            observations = measured
        return capped(observations, self._max_observations)

    def inputs(self, observations: Sequence[Observation]) -> torch.Tensor:
        """``n x d`` model inputs of :meth:`observations`' trials."""
        rows = [self._policy.input_row(o.x, o.budget) for o in observations]
        return torch.tensor(np.array(rows, dtype=float), dtype=gp.DTYPE).reshape(len(rows), -1)

    def targets(self, observations: Sequence[Observation]) -> torch.Tensor:
        """``n x m`` model targets (maximised) of :meth:`observations`' trials."""
        return torch.tensor([self._policy.target_row(o.values or (), o.budget) for o in observations], dtype=gp.DTYPE)

    def pending(self, proposals: Iterable[Proposal]) -> torch.Tensor | None:
        """The inputs of the pending trials ``proposals`` in the acquisition (None: none)."""
        rows = [self._policy.pending_row(self._encoding.encode(p.config), p.budget) for p in proposals]
        return torch.tensor(rows, dtype=gp.DTYPE) if rows else None


class ModelFit:
    """The Gaussian process over ``encoding``'s inputs, its hyperparameters fitted (at most ``fit_maxiter`` L-BFGS-B
    iterations) at every ``refit_every``-th suggestion of this process, the first included, and kept in between."""

    def __init__(self, encoding: SpaceEncoding, fit_maxiter: int | None, refit_every: int):
        self._encoding = encoding
        self._fit_maxiter = fit_maxiter
        self._refit_every = refit_every
        self.suggestions = 0
        self.hyperparameters: dict[str, torch.Tensor] | None = None  # of the last fit

    def fit(self, X: torch.Tensor, Y: torch.Tensor) -> gp.SingleTaskGP:
        """The model of targets ``Y`` at inputs ``X`` for the next suggestion (a ``gp.ModelFittingError`` when the
        fit fails: the suggestion is counted, the kept hyperparameters stay)."""
        refit = self.hyperparameters is None or self.suggestions % self._refit_every == 0
        self.suggestions += 1
        model = gp.fit_model(
            X,
            Y,
            self._encoding,
            maxiter=self._fit_maxiter,
            hyperparameters=None if refit else self.hyperparameters,
        )
        if refit:
            self.hyperparameters = gp.hyperparameters(model)
        return model
