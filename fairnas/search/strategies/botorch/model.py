"""The Gaussian process and the acquisition functions of ``search.strategy=botorch`` (BoTorch 0.18, GPyTorch 1.15).

**Model.** One exact Gaussian process per objective, batched (BoTorch's ``SingleTaskGP`` over an ``n x m`` target),
every objective negated (BoTorch maximises) and standardised (``Standardize``: error and rank disparity live on
different scales), with a learned homoskedastic noise term (the default ``GaussianLikelihood``): a configuration is
judged by the evidence of its neighbours as well as by its own noisy run. Spaces with categorical hyperparameters get
``MixedSingleTaskGP``: its kernel adds and multiplies a Hamming-distance ``CategoricalKernel`` over the choice indices
and the continuous kernel over the other columns. One-hot columns were the alternative; they add a column per choice
(27 for the paper's three operation slots of 9) and a relaxation that the optimiser rounds off afterwards, while
``optimize_acqf_mixed_alternating`` searches categorical and discrete columns exactly by local search. Conditional
spaces impute inactive inputs inside the model (:class:`ImputeInactive`), so the acquisition sees what the
model was fitted on whatever value the optimiser gives an inactive column.

**Acquisition.** ``qLogNoisyExpectedHypervolumeImprovement`` (Daulton et al. 2021, "Parallel Bayesian optimization
of multiple noisy objectives with expected hypervolume improvement"; the log form of Ament et al. 2023,
"Unexpected improvements to expected improvement for Bayesian optimization") for two or more objectives,
``qLogNoisyExpectedImprovement`` for one; running trials enter as ``X_pending``. ``MOMF`` (Irshad et al. 2021,
"Expected hypervolume improvement for simultaneous multi-objective and multi-fidelity optimization") for the
``momf`` fidelity variant, as BoTorch's tutorial sets it up.

BoTorch is an optional extra: without it, importing this module stops with one line naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from fairnas.search.encoding import SpaceEncoding

MISSING_BOTORCH = "search.strategy=botorch needs BoTorch: pip install -e '.[botorch]'"

try:
    from botorch.acquisition import AcquisitionFunction
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.acquisition.multi_objective.multi_fidelity import MOMF
    from botorch.exceptions.errors import ModelFittingError
    from botorch.exceptions.warnings import BotorchWarning
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.gp_regression import SingleTaskGP
    from botorch.models.gp_regression_mixed import MixedSingleTaskGP
    from botorch.models.kernels.categorical import CategoricalKernel
    from botorch.models.transforms.input import InputTransform
    from botorch.optim.optimize_mixed import optimize_acqf_mixed_alternating
    from botorch.sampling.normal import SobolQMCNormalSampler
    from botorch.utils.multi_objective.box_decompositions.non_dominated import FastNondominatedPartitioning
    from botorch.utils.multi_objective.hypervolume import infer_reference_point
    from botorch.utils.multi_objective.pareto import is_non_dominated
    from gpytorch.mlls import ExactMarginalLogLikelihood
except ImportError as error:
    raise ValueError(MISSING_BOTORCH) from error

__all__ = [
    "BotorchWarning",
    "ModelFittingError",
    "fit_model",
    "hyperparameters",
    "improvement",
    "maximize",
    "momf",
    "reference_point",
]

DTYPE = torch.double


class ImputeInactive(InputTransform):
    """Sets the inputs of inactive hyperparameters to their imputed values (:class:`SpaceEncoding`), on the training
    inputs and on every input the acquisition is evaluated at. Columns past the encoding's (the fidelity) pass
    through. Idempotent; the conditions are evaluated on detached values, so gradients flow through active inputs."""

    def __init__(self, encoding: SpaceEncoding):
        super().__init__()
        self.encoding = encoding
        self.transform_on_train = True
        self.transform_on_eval = True
        self.transform_on_fantasize = True

    def transform(self, X: Tensor) -> Tensor:
        d = self.encoding.dim
        flat = X[..., :d].detach().reshape(-1, d).cpu().to(DTYPE).numpy()
        active = torch.as_tensor(self.encoding.active(flat), device=X.device).reshape(*X.shape[:-1], d)
        inactive = torch.tensor([column.inactive for column in self.encoding.columns], dtype=X.dtype, device=X.device)
        return torch.cat([torch.where(active, X[..., :d], inactive), X[..., d:]], dim=-1)


class OneHotCategoricalKernel(CategoricalKernel):
    """BoTorch's Hamming-distance ``CategoricalKernel``, ``exp(-mean_d [x1_d != x2_d] / l_d)``, computed as one matrix
    product of one-hot codes, ``exp(-(sum_d w_d - onehot(x1) diag(w) onehot(x2)^T))`` with ``w_d = 1 / (D l_d)``,
    instead of comparing every pair of points in every column: the same values. The acquisition evaluates the
    kernel over the trials and a batch of candidates jointly, where the comparisons dominated a suggestion
    (docs/search_benchmark.md, "Its cost per suggestion"). ``choices``: the values of each column, in the order of
    the kernel's columns; inputs outside them are compared as BoTorch compares them."""

    @property
    def choices(self) -> list[list[float]]:
        return self._choices

    @choices.setter
    def choices(self, choices: list[list[float]]) -> None:
        """Also sets, once, each one-hot code's column and value."""
        self._choices = choices
        self._column = torch.tensor([d for d, values in enumerate(choices) for _ in values])
        self._value = torch.tensor([v for values in choices for v in values], dtype=DTYPE)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False) -> Tensor:
        column = self._column.to(x1.device)
        value = self._value.to(device=x1.device, dtype=x1.dtype)
        codes1 = None if last_dim_is_batch else self._one_hot(x1, column, value)
        codes2 = None if codes1 is None else self._one_hot(x2, column, value)
        if codes1 is None or codes2 is None:
            return super().forward(x1, x2, diag=diag, last_dim_is_batch=last_dim_is_batch)
        weights = self.lengthscale.reciprocal() / x1.shape[-1]  # batch x 1 x D
        matches = (codes1 * weights[..., column]) @ codes2.transpose(-1, -2)
        res = torch.exp(matches - weights.sum(-1, keepdim=True))
        return torch.diagonal(res, dim1=-1, dim2=-2) if diag else res

    def _one_hot(self, x: Tensor, column: Tensor, value: Tensor) -> Tensor | None:
        """``... x n x C``: 1 where a row's ``column`` takes ``value``; None when a value is not among ``choices``."""
        hits = x[..., column] == value
        if not bool((hits.sum(-1) == x.shape[-1]).all()):
            return None
        return hits.to(self.lengthscale.dtype)


def fit_model(
    X: Tensor,
    Y: Tensor,
    encoding: SpaceEncoding,
    *,
    maxiter: int | None,
    hyperparameters: Mapping[str, Tensor] | None = None,
) -> SingleTaskGP:
    """A Gaussian process of the ``n x m`` targets ``Y`` (maximised) at inputs ``X`` (the encoding's columns, then
    any fidelity column), its hyperparameters and noise fitted by maximum marginal likelihood (L-BFGS-B, at most
    ``maxiter`` iterations: the mixed kernel's many lengthscales take hundreds to converge on a flat likelihood), or
    set to ``hyperparameters`` (:func:`hyperparameters` of an earlier model of the same space) without a fit."""
    transform = ImputeInactive(encoding) if encoding.conditional else None
    categorical = list(encoding.categorical_columns)
    model: SingleTaskGP
    if categorical:
        model = MixedSingleTaskGP(X, Y, cat_dims=categorical, input_transform=transform)
        choices = [[*encoding.columns[d].values, encoding.columns[d].inactive] for d in categorical]
        for kernel in model.covar_module.modules():
            if type(kernel) is CategoricalKernel:  # BoTorch builds it; it computes the same values faster
                kernel.__class__ = OneHotCategoricalKernel
                kernel.choices = choices
    else:
        model = SingleTaskGP(X, Y, input_transform=transform)
    if hyperparameters is not None:
        model.load_state_dict(hyperparameters, strict=False)
        return model
    options = None if maxiter is None else {"options": {"maxiter": maxiter}}
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs=options)
    return model


def hyperparameters(model: SingleTaskGP) -> dict[str, Tensor]:
    """The fitted hyperparameters of ``model`` (kernel, mean, noise), without what depends on its training data
    (the standardisation's statistics): what :func:`fit_model` sets on a model of other data of the same space."""
    return {
        name: value.detach().clone()
        for name, value in model.state_dict().items()
        if not name.startswith(("outcome_transform.", "input_transform."))
    }


def reference_point(Y: Tensor) -> Tensor:
    """BoTorch's heuristic reference point for the maximised targets ``Y``: the nadir of their non-dominated set
    less 10 % of its range."""
    return infer_reference_point(Y[is_non_dominated(Y)])


def improvement(
    model: SingleTaskGP,
    *,
    X_baseline: Tensor,
    ref_point: Tensor | None,
    X_pending: Tensor | None,
    mc_samples: int,
    seed: int,
) -> AcquisitionFunction:
    """The log noisy expected (hypervolume) improvement over the trials at ``X_baseline``: qLogNEHVI with
    ``ref_point``, qLogNEI for a single objective (``ref_point`` None)."""
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([mc_samples]), seed=seed)
    if ref_point is None:
        return qLogNoisyExpectedImprovement(
            model, X_baseline, sampler=sampler, X_pending=X_pending, prune_baseline=True
        )
    return qLogNoisyExpectedHypervolumeImprovement(
        model, ref_point, X_baseline, sampler=sampler, X_pending=X_pending, prune_baseline=True
    )


def momf(
    model: SingleTaskGP,
    *,
    Y: Tensor,
    ref_point: Tensor,
    X_pending: Tensor | None,
    cost: Callable[[Tensor], Tensor],
    mc_samples: int,
    seed: int,
) -> AcquisitionFunction:
    """BoTorch's MOMF over the targets ``Y`` whose last column is the trust (fidelity) objective, as in BoTorch's
    MOMF tutorial: expected hypervolume improvement over the observed ``Y`` divided by ``cost`` (of the inputs)."""
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([mc_samples]), seed=seed)
    partitioning: Any = FastNondominatedPartitioning(ref_point=ref_point, Y=Y)  # MOMF's annotation is narrower
    return MOMF(model, ref_point, partitioning, sampler=sampler, X_pending=X_pending, cost_call=cost)


def maximize(
    acquisition: AcquisitionFunction,
    encoding: SpaceEncoding,
    *,
    extra_discrete: Mapping[int, list[float]] | None = None,
    fixed: Mapping[int, float] | None = None,
    n_extra: int = 0,
    raw_samples: int,
    num_restarts: int,
) -> tuple[np.ndarray, float]:
    """The input maximising ``acquisition`` and its value: BoTorch's ``optimize_acqf_mixed_alternating`` (L-BFGS-B
    on the continuous columns, local search on the discrete and categorical ones) from ``num_restarts`` of
    ``raw_samples`` random starts. ``n_extra`` columns in [0, 1] follow the encoding's (the fidelity): discrete
    ones in ``extra_discrete``, ``fixed`` ones held at a value."""
    bounds = np.concatenate([encoding.bounds(), np.array([[0.0], [1.0]]).repeat(n_extra, axis=1)], axis=1)
    discrete = {**encoding.discrete_columns, **(extra_discrete or {})}
    categorical = encoding.categorical_columns
    options = {"num_spray_points": 0} if discrete or categorical else {}  # no sprays around imputed inputs
    candidates, value = optimize_acqf_mixed_alternating(
        acquisition,
        torch.as_tensor(bounds, dtype=DTYPE),
        discrete_dims=discrete or None,
        cat_dims=categorical or None,
        fixed_features=dict(fixed or {}) or None,
        raw_samples=raw_samples,
        num_restarts=num_restarts,
        options=options,
    )
    assert value is not None  # return_acq_values=True
    return candidates[0].detach().cpu().numpy(), float(value.reshape(-1)[0])
