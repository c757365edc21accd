"""A plain BoTorch loop outside fairnas: the reference ``search.strategy=botorch`` is measured against.

It runs on BoTorch's multi-objective multi-fidelity test problems (``botorch_problems.MomfTarget``, either fidelity
mapping) with nothing of ``fairnas.search`` but its trial ids, in the two set-ups BoTorch's tutorials give:

- ``full``: every evaluation at the maximum budget. A two-output ``SingleTaskGP`` over the inputs (scaled to the
  unit cube; BoTorch's defaults: standardised outcomes, an inferred noise term) and ``qLogNoisyExpectedHypervolume
  Improvement`` with the problem's reference point, optimised by ``optimize_acqf`` (BoTorch's multi-objective
  tutorial). Initial design: 2 x (inputs + 1) scrambled Sobol points.
- ``momf``: BoTorch's MOMF tutorial. One ``SingleTaskGP`` per output (Matern 5/2, the tutorial's Gamma priors and
  fixed noise 1e-6) over the inputs and the fidelity s, the outputs being the objectives and the trust objective s;
  ``MOMF`` with reference point (the problem's, 0) and cost = the budget in epochs (8 s under ``share_of_max`` with
  budgets up to 8), optimised over the inputs with s on the rungs (``optimize_acqf_mixed``). Initial design: the same
  Sobol points, each at a rung drawn with probability inversely proportional to its cost, as the tutorial draws s.

A trial costs its budget (no checkpoints to continue), and a trial starts only while the consumed budget is below
``total_budget`` (the benchmark's rule). The result is one row per trial in the layout of the search's trials.csv
(``trial_id``, ``config_id``, ``budget``, ``seed``, ``status``, the objectives, ``cost``, ``wall_time_s`` with the
time of the suggestion that proposed it, the inputs), so ``fairnas.search.hypervolume.hypervolume_curve`` reads it
as it reads a search (only the full-budget trials count).

``bench/botorch_reference.py`` runs it from the command line.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

try:
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.acquisition.multi_objective.multi_fidelity import MOMF
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.gp_regression import SingleTaskGP
    from botorch.models.model_list_gp_regression import ModelListGP
    from botorch.models.transforms.outcome import Standardize
    from botorch.optim.optimize import optimize_acqf, optimize_acqf_mixed
    from botorch.sampling.normal import SobolQMCNormalSampler
    from botorch.utils.multi_objective.box_decompositions.non_dominated import FastNondominatedPartitioning
    from botorch.utils.sampling import draw_sobol_samples
    from botorch.utils.transforms import unnormalize
    from gpytorch.kernels import MaternKernel, ScaleKernel
    from gpytorch.mlls import ExactMarginalLogLikelihood
    from gpytorch.mlls.sum_marginal_log_likelihood import SumMarginalLogLikelihood
    from gpytorch.priors import GammaPrior
except ImportError as error:
    raise ImportError("the plain BoTorch loop needs BoTorch: pip install -e '.[botorch]'") from error

from fairnas.benchmarks.botorch_problems import MomfTarget
from fairnas.search import config_id

VARIANTS = ("full", "momf")
DTYPE = torch.double


def run_reference(
    target: MomfTarget,
    variant: str,
    *,
    seed: int,
    total_budget: float,
    rungs: Sequence[float],
    raw_samples: int = 512,
    num_restarts: int = 10,
    mc_samples: int = 128,
) -> pd.DataFrame:
    """One run of the plain loop until ``total_budget`` epochs are spent; its trials as the search writes them."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; allowed: {list(VARIANTS)}")
    torch.manual_seed(seed)
    d = len(target.inputs)
    max_budget = target.max_budget
    unit = torch.stack([torch.zeros(d, dtype=DTYPE), torch.ones(d, dtype=DTYPE)])
    box = target.problem.bounds[:, :d].to(DTYPE)
    initial = draw_sobol_samples(bounds=unit, n=2 * (d + 1), q=1, seed=seed).squeeze(1)
    weights = 1 / np.array(rungs, dtype=float)
    draws = np.random.default_rng(seed).choice(rungs, size=len(initial), p=weights / weights.sum())
    initial_budgets = [max_budget] * len(initial) if variant == "full" else [float(b) for b in draws]

    X: list[torch.Tensor] = []  # unit-cube inputs
    budgets: list[float] = []
    rows: list[dict] = []
    spent = 0.0
    while spent < total_budget:
        start = time.perf_counter()
        if len(X) < len(initial):
            x, budget = initial[len(X)], initial_budgets[len(X)]
        elif variant == "full":
            x, budget = _full_candidate(target, X, rows, raw_samples, num_restarts, mc_samples, seed), max_budget
        else:
            x, budget = _momf_candidate(target, X, budgets, rows, rungs, raw_samples, num_restarts, mc_samples, seed)
        suggestion_s = time.perf_counter() - start
        config = dict(zip(target.inputs, unnormalize(x, box).tolist(), strict=True))
        values = target(config, seed, budget)
        X.append(x)
        budgets.append(budget)
        spent += budget
        rows.append(
            {
                "trial_id": len(rows),
                "config_id": config_id(config),
                "budget": budget,
                "seed": seed,
                "status": "success",
                **values,
                "cost": budget,
                "wall_time_s": suggestion_s,
                **config,
            }
        )
    return pd.DataFrame(rows)


def _objectives(target: MomfTarget, rows: list[dict]) -> torch.Tensor:
    """The observed objectives, maximised (BoTorch's sign)."""
    return -torch.tensor([[row[name] for name in target.objectives] for row in rows], dtype=DTYPE)


def _full_candidate(
    target: MomfTarget, X: list[torch.Tensor], rows: list[dict], raw_samples: int, num_restarts: int, mc: int, seed: int
) -> torch.Tensor:
    """qLogNEHVI's next point of a two-output GP over the inputs (BoTorch's multi-objective tutorial)."""
    train_X = torch.stack(X)
    train_Y = _objectives(target, rows)
    model = SingleTaskGP(train_X, train_Y, outcome_transform=Standardize(m=train_Y.shape[-1]))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    acquisition = qLogNoisyExpectedHypervolumeImprovement(
        model,
        ref_point=target.problem.ref_point.to(DTYPE),
        X_baseline=train_X,
        sampler=SobolQMCNormalSampler(sample_shape=torch.Size([mc]), seed=seed + len(X)),
        prune_baseline=True,
    )
    unit = torch.stack([torch.zeros(train_X.shape[-1]), torch.ones(train_X.shape[-1])]).to(DTYPE)
    candidate, _ = optimize_acqf(
        acquisition,
        bounds=unit,
        q=1,
        num_restarts=num_restarts,
        raw_samples=raw_samples,
        options={"batch_limit": 5, "maxiter": 200},
    )
    return candidate[0].detach()


def _momf_candidate(
    target: MomfTarget,
    X: list[torch.Tensor],
    budgets: list[float],
    rows: list[dict],
    rungs: Sequence[float],
    raw_samples: int,
    num_restarts: int,
    mc: int,
    seed: int,
) -> tuple[torch.Tensor, float]:
    """MOMF's next point and rung, as BoTorch's MOMF tutorial sets it up (fidelity input s = target.fidelity)."""
    fidelities = torch.tensor([target.fidelity(b) for b in budgets], dtype=DTYPE).unsqueeze(-1)
    train_X = torch.cat([torch.stack(X), fidelities], dim=-1)
    train_Y = torch.cat([_objectives(target, rows), fidelities], dim=-1)  # the trust objective: s itself
    models = [
        SingleTaskGP(
            train_X,
            train_Y[:, i : i + 1],
            train_Yvar=torch.full_like(train_Y[:, i : i + 1], 1e-6),
            outcome_transform=Standardize(m=1),
            covar_module=ScaleKernel(
                MaternKernel(nu=2.5, ard_num_dims=train_X.shape[-1], lengthscale_prior=GammaPrior(2.0, 2.0)),
                outputscale_prior=GammaPrior(2.0, 0.15),
            ),
        )
        for i in range(train_Y.shape[-1])
    ]
    model = ModelListGP(*models)
    fit_gpytorch_mll(SumMarginalLogLikelihood(model.likelihood, model))
    ref_point = torch.cat([target.problem.ref_point.to(DTYPE), torch.zeros(1, dtype=DTYPE)])
    partitioning = FastNondominatedPartitioning(ref_point=ref_point, Y=train_Y)
    max_budget = target.max_budget
    acquisition = MOMF(
        model,
        ref_point,
        partitioning,
        sampler=SobolQMCNormalSampler(sample_shape=torch.Size([mc]), seed=seed + len(X)),
        cost_call=lambda Z: _budget_of(target, Z[..., -1:], max_budget),
    )
    d = train_X.shape[-1]
    unit = torch.stack([torch.zeros(d), torch.ones(d)]).to(DTYPE)
    candidate, value = optimize_acqf_mixed(
        acquisition,
        bounds=unit,
        q=1,
        num_restarts=num_restarts,
        raw_samples=raw_samples,
        fixed_features_list=[{d - 1: target.fidelity(budget)} for budget in rungs],
        options={"batch_limit": 5, "maxiter": 200},
    )
    s = float(candidate[0, -1]) if float(value) > 0 else target.fidelity(rungs[0])  # the tutorial: 0 -> cheapest
    budget = min(rungs, key=lambda b: abs(target.fidelity(b) - s))
    return candidate[0, :-1].detach(), float(budget)


def _budget_of(target: MomfTarget, s: torch.Tensor, max_budget: float) -> torch.Tensor:
    """The budget (epochs, the cost) at fidelity ``s``, the inverse of ``target.fidelity``."""
    if target.fidelity_mapping == "share_of_max":
        return s * max_budget
    return target.min_budget + s * (max_budget - target.min_budget)


def rungs_of(min_budget: float, max_budget: float, eta: int) -> list[float]:
    """min_budget * eta^k below max_budget, then max_budget (the search's rungs)."""
    rungs = []
    while min_budget < max_budget and not math.isclose(min_budget, max_budget):
        rungs.append(float(min_budget))
        min_budget *= eta
    return [*rungs, float(max_budget)]
