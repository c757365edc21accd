"""The acquisition functions of one ``search.strategy=botorch`` search, set up with its settings: qLogNEHVI
(qLogNEI for one objective) and MOMF from :mod:`~fairnas.search.strategies.botorch.model`, with the hypervolume
reference of ``search.reference_point`` or BoTorch's heuristic, ``search.botorch.mc_samples`` quasi-Monte Carlo
samples, and maximised over the encoding's inputs with ``raw_samples`` and ``num_restarts``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fairnas.search.encoding import SpaceEncoding
from fairnas.search.strategies.botorch import model as gp

if TYPE_CHECKING:
    from fairnas.search.strategies.botorch import BotorchSettings


class Acquisition:
    """The acquisitions over ``encoding``'s inputs for ``n_objectives`` objectives (minimised; the model maximises
    them negated), ``reference_point`` the hypervolume reference in the objectives' own terms (None: BoTorch's
    heuristic)."""

    def __init__(
        self,
        encoding: SpaceEncoding,
        options: BotorchSettings,
        reference_point: Sequence[float] | None,
        n_objectives: int,
    ):
        self.encoding = encoding
        self._options = options
        self._reference = None if reference_point is None else -torch.tensor(reference_point, dtype=gp.DTYPE)
        self._single_objective = n_objectives == 1

    def reference_point(self, Y: torch.Tensor) -> torch.Tensor | None:
        """The hypervolume reference (maximised space): ``search.reference_point`` negated, else BoTorch's
        heuristic on ``Y``; None for a single objective."""
        if self._single_objective:
            return None
        return self._reference if self._reference is not None else gp.reference_point(Y)

    def improvement(
        self,
        model: gp.SingleTaskGP,
        X_baseline: torch.Tensor,
        Y_baseline: torch.Tensor,
        X_pending: torch.Tensor | None,
        seed: int,
    ) -> gp.AcquisitionFunction:
        """qLogNEHVI (qLogNEI for one objective) over the trials at ``X_baseline`` (targets ``Y_baseline``)."""
        return gp.improvement(
            model,
            X_baseline=X_baseline,
            ref_point=self.reference_point(Y_baseline),
            X_pending=X_pending,
            mc_samples=self._options.mc_samples,
            seed=seed,
        )

    def momf(
        self,
        model: gp.SingleTaskGP,
        Y: torch.Tensor,
        X_pending: torch.Tensor | None,
        cost: Callable[[torch.Tensor], torch.Tensor],
        seed: int,
    ) -> gp.AcquisitionFunction:
        """MOMF over the targets ``Y`` whose last column is the trust objective (1 at the full budget). Its
        reference is ``search.reference_point``'s, else BoTorch's heuristic on the full-budget trials (all trials
        while there is none), and 0 for the trust objective."""
        objectives = Y[:, :-1]
        at_max = Y[:, -1] == 1.0
        reference = (
            self._reference
            if self._reference is not None
            else gp.reference_point(objectives[at_max] if at_max.any() else objectives)
        )
        return gp.momf(
            model,
            Y=Y,
            ref_point=torch.cat([reference, torch.zeros(1, dtype=gp.DTYPE)]),
            X_pending=X_pending,
            cost=cost,
            mc_samples=self._options.mc_samples,
            seed=seed,
        )

    def maximize(self, acquisition: gp.AcquisitionFunction, **fidelity: Any) -> tuple[np.ndarray, float]:
        """The input maximising ``acquisition`` and its value
        (:func:`~fairnas.search.strategies.botorch.model.maximize`; ``fidelity``: its arguments for the columns
        after the encoding's)."""
        return gp.maximize(
            acquisition,
            self.encoding,
            raw_samples=self._options.raw_samples,
            num_restarts=self._options.num_restarts,
            **fidelity,
        )
