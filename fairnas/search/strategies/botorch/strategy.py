"""``BotorchStrategy``: multi-objective Bayesian optimisation with a Gaussian process (BoTorch), through ask/tell.

**Initial design.** The first ``search.initial_design_size`` distinct configurations of a scrambled Sobol sequence
over the model's inputs (seeded by ``search.seed``; default 2 x (inputs + 1), at most a quarter of the expected
full-budget trials, at least 2), decoded through ConfigSpace so conditions hold. The model takes over once it has
two trials to fit, one of them at the full budget (``full``, ``early_stop``); until then, further Sobol points.

**Fidelity** (``search.botorch.fidelity``; rungs min_budget * eta^k below max_budget, then max_budget):

- ``full``: every trial at the maximum budget; the model sees the configuration only.
- ``early_stop``: the model also sees the budget (a column in [0, 1], log scale), and the lower rungs serve to stop
  configurations early. The initial design climbs every rung. After it, each ask compares two ways to spend epochs
  towards one more full-budget result: start the configuration maximising qLogNEHVI at the full budget (at
  min_budget; max_budget epochs to go), or take a started configuration one rung up (max_budget minus its budget
  to go, continuing its checkpoint), scored by its own qLogNEHVI at the full budget given what its lower rungs
  showed. The higher log improvement per epoch still to train wins.
- ``momf``: BoTorch's MOMF acquisition picks configuration and rung together (a trust objective budget / max_budget
  beside the objectives, cost = the rung's epochs), as in BoTorch's tutorial; its initial design draws each
  configuration's rung with probability inversely proportional to its cost.

A configuration picked again at a higher budget is proposed as the same configuration, so a target that continues
lower-budget checkpoints (``TrainingTarget``) trains only the epochs between. The reported front is the full-budget
trials', as for every strategy.

**Bookkeeping.** Trials asked and not yet told are pending: they enter the acquisition as ``X_pending`` (at the full
budget for ``early_stop``, where they head), and no trial is proposed twice. A crashed trial (or one whose value
was capped at the crash cost) enters the model with the worst value observed per objective (``crashed: worst``: the
model learns to avoid what crashes, e.g. out-of-memory architectures) or not at all (``exclude``); it is never
continued. The model is fitted on at most ``search.botorch.max_observations`` trials: half the best by non-dominated
sorting, half the most recent of the rest. Every ask runs under a seed drawn from ``search.seed`` and the number of
trials known, so a search repeats itself given the same results; a resumed search starts from the trials an earlier
run finished (``history``, read from trials.csv) and never proposes one of them again.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import math
import random
import warnings
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from ConfigSpace import ConfigurationSpace
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from fairnas.search.encoding import CATEGORICAL, SpaceEncoding
from fairnas.search.records import TrialKey, TrialRecord, trial_key
from fairnas.search.strategies.base import Proposal
from fairnas.search.strategies.botorch import model as gp
from fairnas.search.trial import SUCCESS, TrialOutcome, config_id, native_config

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings

log = logging.getLogger("fairnas.search")

FULL, EARLY_STOP, MOMF = "full", "early_stop", "momf"
MAX_DRAWS = 100
"""Draws (Sobol points, random samples) that may all hit known configurations before none is proposed."""


@dataclasses.dataclass(frozen=True)
class Observation:
    """A told trial: its configuration (and id), the configuration's inputs ``x``, budget, objective values (None: no
    measurement, crashed) and the order it was told in."""

    config: dict[str, Any]
    cid: str
    x: np.ndarray
    budget: float
    values: tuple[float, ...] | None
    order: int


def rungs(min_budget: float, max_budget: float, eta: int) -> list[float]:
    """The budgets a trial may get: min_budget * eta^k below max_budget, then max_budget (MO-ASHA's rungs)."""
    budgets = []
    budget = float(min_budget)
    while budget < max_budget and not math.isclose(budget, max_budget):
        budgets.append(budget)
        budget *= eta
    return [*budgets, float(max_budget)]


def initial_design_size(settings: SearchSettings, dim: int) -> int:
    """``settings.initial_design_size``, else 2 x (dim + 1) capped at a quarter of the expected full-budget trials
    (``n_trials``, or ``total_budget / max_budget``), at least 2."""
    if settings.initial_design_size is not None:
        return settings.initial_design_size
    if settings.n_trials is not None:
        expected = settings.n_trials
    else:
        assert settings.total_budget is not None  # SearchSettings requires one of the two
        expected = int(settings.total_budget // settings.max_budget)
    return max(2, min(2 * (dim + 1), expected // 4))


class BotorchStrategy:
    """A Gaussian-process search over ``configspace`` through ask/tell; ``history``: trials of an earlier run."""

    def __init__(
        self, configspace: ConfigurationSpace, settings: SearchSettings, *, history: Sequence[TrialRecord] = ()
    ):
        self._configspace = configspace
        self._options = settings.options
        self._objectives = settings.objectives
        self._crash_costs = settings.crash_costs
        self._seed = settings.seed
        self._encoding = SpaceEncoding(configspace)
        self.rungs = rungs(settings.min_budget, settings.max_budget, settings.eta)
        self._max_budget = settings.max_budget
        self.fidelity = settings.options.fidelity if len(self.rungs) > 1 else FULL
        reference = settings.reference_point
        self._reference = None if reference is None else -torch.tensor(reference, dtype=gp.DTYPE)
        self._n_initial = initial_design_size(settings, self._encoding.dim)
        self._sobol: list[dict[str, Any]] = []  # decoded Sobol points, in sequence order
        self._sobol_engine = torch.quasirandom.SobolEngine(max(self._encoding.dim, 1), scramble=True, seed=self._seed)
        self._design: list[dict[str, Any]] | None = None
        self._observations: dict[TrialKey, Observation] = {}
        self._by_config: dict[str, list[Observation]] = {}
        self._pending: dict[TrialKey, Proposal] = {}
        self._model_suggestions = 0  # of this process: the first one fits the hyperparameters
        self._hyperparameters: dict[str, torch.Tensor] | None = None  # of the last fit
        for record in history:
            self.tell_record(record)

    # ------------------------------------------------------------------------------------------------- ask/tell

    def ask(self) -> Proposal | None:
        """The next trial; None when every configuration is known or running (the search is then exhausted)."""
        with _seeded(self._ask_seed()), warnings.catch_warnings():
            warnings.simplefilter("ignore", gp.BotorchWarning)
            proposal = self._initial_proposal() or self._model_proposal()
        if proposal is not None:
            self._pending[trial_key(proposal.config, proposal.budget)] = proposal
        return proposal

    def tell(self, proposal: Proposal, outcome: TrialOutcome) -> None:
        self._observe(proposal.config, proposal.budget, outcome)

    def tell_record(self, record: TrialRecord) -> None:
        """A trial an earlier run finished: it joins the model's data (once; it is never proposed again)."""
        self._observe(record.config, record.budget, record.outcome)

    def _observe(self, config: dict[str, Any], budget: float, outcome: TrialOutcome) -> None:
        key = trial_key(config, budget)
        self._pending.pop(key, None)
        if key in self._observations:
            return
        values = tuple(outcome.values[name] for name in self._objectives)
        measured = outcome.status == SUCCESS and all(
            value != cost for value, cost in zip(values, self._crash_costs, strict=True)
        )
        observation = Observation(
            native_config(config),
            key[0],
            self._encoding.encode(config),
            float(budget),
            values if measured else None,
            len(self._observations),
        )
        self._observations[key] = observation
        self._by_config.setdefault(observation.cid, []).append(observation)

    # ------------------------------------------------------------------------------------------ initial design

    def _initial_proposal(self) -> Proposal | None:
        """The initial design's next trial (``early_stop``: its next rung), or None once it is all asked."""
        known = self._known_configs()
        for index, config in enumerate(self._initial_design()):
            if self.fidelity == EARLY_STOP:
                budget = self._next_rung(config)
                if budget is not None:
                    return Proposal(config, budget)
            elif config_id(config) not in known:
                return Proposal(config, self._initial_budget(index))
        return None

    def _initial_design(self) -> list[dict[str, Any]]:
        """The first ``n_initial`` distinct configurations of the Sobol sequence."""
        if self._design is None:
            design: dict[str, dict[str, Any]] = {}
            for index in range(self._n_initial + MAX_DRAWS):
                if len(design) == self._n_initial:
                    break
                config = self._sobol_point(index)
                design.setdefault(config_id(config), config)
            self._design = list(design.values())
        return self._design

    def _initial_budget(self, index: int) -> float:
        """``full``: the maximum budget; ``momf``: a rung drawn with probability inversely proportional to its cost
        (BoTorch's MOMF tutorial), seeded by the search's seed and the design point; ``early_stop``: the first rung."""
        if self.fidelity == FULL:
            return self._max_budget
        if self.fidelity == EARLY_STOP:
            return self.rungs[0]
        weights = 1 / np.array(self.rungs)
        return float(np.random.default_rng([self._seed, index]).choice(self.rungs, p=weights / weights.sum()))

    def _sobol_point(self, index: int) -> dict[str, Any]:
        """The configuration of the ``index``-th point of the scrambled Sobol sequence."""
        while len(self._sobol) <= index:
            u = self._sobol_engine.draw(1, dtype=gp.DTYPE)[0, : self._encoding.dim].numpy()
            x = [
                min(math.floor(value * len(column.values)), len(column.values) - 1)
                if column.kind == CATEGORICAL
                else value
                for value, column in zip(u, self._encoding.columns, strict=True)
            ]
            self._sobol.append(self._encoding.decode(np.array(x, dtype=float)))
        return self._sobol[index]

    def _climb(self) -> Proposal | None:
        """``early_stop`` while no trial reached the maximum budget (the initial design crashed): the earliest
        started configuration that may go one rung up."""
        if self.fidelity != EARLY_STOP:
            return None
        for observation in sorted(self._latest_per_config(), key=lambda o: o.order):
            budget = self._next_rung(observation.config)
            if budget is not None:
                return Proposal(observation.config, budget)
        return None

    def _extra_sobol_proposal(self) -> Proposal | None:
        """The next Sobol configuration no trial has, while the model lacks data."""
        known = self._known_configs()
        for index in range(len(self._sobol) + MAX_DRAWS):
            config = self._sobol_point(index)
            if config_id(config) not in known:
                return Proposal(config, self._initial_budget(index))
        return None

    # -------------------------------------------------------------------------------------------------- model

    def _model_proposal(self) -> Proposal | None:
        observations = self._training_observations()
        enough = len(observations) >= 2 and any(o.budget == self._max_budget for o in observations)
        if self._encoding.dim == 0 or not (enough or (self.fidelity == MOMF and len(observations) >= 2)):
            return self._climb() or self._extra_sobol_proposal()
        X, Y = self._inputs(observations), self._targets(observations)
        refit = self._hyperparameters is None or self._model_suggestions % self._options.refit_every == 0
        self._model_suggestions += 1
        try:
            model = gp.fit_model(
                X,
                Y,
                self._encoding,
                maxiter=self._options.fit_maxiter,
                hyperparameters=None if refit else self._hyperparameters,
            )
        except gp.ModelFittingError as error:
            log.warning("the Gaussian process did not fit (%s); a random configuration instead", error)
            return self._random_proposal(self._max_budget if self.fidelity == FULL else self.rungs[0])
        if refit:
            self._hyperparameters = gp.hyperparameters(model)
        if self.fidelity == FULL:
            return self._full_proposal(model, X, Y)
        if self.fidelity == EARLY_STOP:
            return self._early_stop_proposal(model, X, Y, observations)
        return self._momf_proposal(model, Y)

    def _full_proposal(self, model: gp.SingleTaskGP, X: torch.Tensor, Y: torch.Tensor) -> Proposal | None:
        acquisition = gp.improvement(
            model,
            X_baseline=X,
            ref_point=self._reference_point(Y),
            X_pending=self._pending_inputs(),
            mc_samples=self._options.mc_samples,
            seed=self._ask_seed(),
        )
        x, _ = self._maximize(acquisition)
        return self._fresh(self._encoding.decode(x), self._max_budget) or self._random_proposal(self._max_budget)

    def _early_stop_proposal(
        self, model: gp.SingleTaskGP, X: torch.Tensor, Y: torch.Tensor, observations: list[Observation]
    ) -> Proposal | None:
        at_max = torch.tensor([o.budget == self._max_budget for o in observations])
        acquisition = gp.improvement(
            model,
            X_baseline=X[at_max],
            ref_point=self._reference_point(Y[at_max]),
            X_pending=self._pending_inputs(),
            mc_samples=self._options.mc_samples,
            seed=self._ask_seed(),
        )
        x, value = self._maximize(acquisition, fixed={self._encoding.dim: 1.0}, n_extra=1)
        new = self._encoding.decode(x[: self._encoding.dim])
        score = value - math.log(self._max_budget)
        choice: tuple[dict[str, Any], float | None] = (new, None)
        started = [
            (o.config, o.x, budget)
            for o in self._latest_per_config()
            if (budget := self._next_rung(o.config)) is not None
        ]
        if started:
            inputs = torch.tensor(np.array([[*x, 1.0] for _, x, _ in started]), dtype=gp.DTYPE)
            with torch.no_grad():
                values = acquisition(inputs.unsqueeze(-2)).tolist()
            for (config, _, budget), log_improvement in zip(started, values, strict=True):
                to_go = self._max_budget - self._highest_budget(config)
                if log_improvement - math.log(to_go) > score:
                    score, choice = log_improvement - math.log(to_go), (config, budget)
        config, budget = choice
        if budget is None:  # a new configuration, unless the optimiser landed on a started one
            budget = self._next_rung(config) if config_id(config) in self._known_configs() else self.rungs[0]
        if budget is None:
            return self._random_proposal(self.rungs[0])
        return self._fresh(config, budget) or self._random_proposal(self.rungs[0])

    def _momf_proposal(self, model: gp.SingleTaskGP, Y: torch.Tensor) -> Proposal | None:
        objectives = Y[:, :-1]
        at_max = Y[:, -1] == 1.0
        reference = (
            self._reference
            if self._reference is not None
            else gp.reference_point(objectives[at_max] if at_max.any() else objectives)
        )
        low, high = math.log(self.rungs[0]), math.log(self._max_budget)
        acquisition = gp.momf(
            model,
            Y=Y,
            ref_point=torch.cat([reference, torch.zeros(1, dtype=gp.DTYPE)]),
            X_pending=self._pending_inputs(),
            cost=lambda X: torch.exp(low + X[..., -1:] * (high - low)),  # the rung's epochs
            mc_samples=self._options.mc_samples,
            seed=self._ask_seed(),
        )
        codes = [self._fidelity_input(budget) for budget in self.rungs]
        x, value = self._maximize(acquisition, extra_discrete={self._encoding.dim: codes}, n_extra=1)
        budget = self.rungs[int(np.argmin([abs(code - x[-1]) for code in codes]))] if value > 0 else self.rungs[0]
        return self._fresh(self._encoding.decode(x[: self._encoding.dim]), budget) or self._random_proposal(budget)

    def _maximize(self, acquisition: Any, **fidelity: Any) -> tuple[np.ndarray, float]:
        return gp.maximize(
            acquisition,
            self._encoding,
            raw_samples=self._options.raw_samples,
            num_restarts=self._options.num_restarts,
            **fidelity,
        )

    # ----------------------------------------------------------------------------------------------- the data

    def _training_observations(self) -> list[Observation]:
        """The trials the model is fitted on: measured ones (and crashed ones at the worst value measured, with
        ``crashed: worst``), at the maximum budget only for ``full``, capped at ``max_observations``."""
        observations = [o for o in self._observations.values() if self.fidelity != FULL or o.budget == self._max_budget]
        measured = [o for o in observations if o.values is not None]
        if self._options.crashed == "worst" and measured:
            worst = tuple(np.max([o.values for o in measured if o.values is not None], axis=0).tolist())
            observations = [o if o.values is not None else dataclasses.replace(o, values=worst) for o in observations]
        else:
            observations = measured
        return self._capped(observations)

    def _capped(self, observations: list[Observation]) -> list[Observation]:
        """At most ``max_observations``: half the best by non-dominated sorting (ties: the most recent), then the
        most recent of the rest; in the order they were told."""
        cap = self._options.max_observations
        if cap is None or len(observations) <= cap:
            return observations
        values = np.array([o.values for o in observations], dtype=float)
        _, rank = NonDominatedSorting().do(values, return_rank=True)
        by_rank = sorted(range(len(observations)), key=lambda i: (rank[i], -observations[i].order))
        kept = set(by_rank[: cap // 2])
        recent = sorted(set(range(len(observations))) - kept, key=lambda i: -observations[i].order)
        kept |= set(recent[: cap - len(kept)])
        return [observations[i] for i in sorted(kept)]

    def _inputs(self, observations: list[Observation]) -> torch.Tensor:
        """The model's inputs: the configuration's columns, then (``early_stop``, ``momf``) the budget's."""
        rows = [o.x if self.fidelity == FULL else [*o.x, self._fidelity_input(o.budget)] for o in observations]
        return torch.tensor(np.array(rows, dtype=float), dtype=gp.DTYPE).reshape(len(rows), -1)

    def _targets(self, observations: list[Observation]) -> torch.Tensor:
        """The model's targets: the objectives negated (maximised); ``momf`` adds the trust objective."""
        rows = [
            [-value for value in o.values or ()] + ([o.budget / self._max_budget] if self.fidelity == MOMF else [])
            for o in observations
        ]
        return torch.tensor(rows, dtype=gp.DTYPE)

    def _pending_inputs(self) -> torch.Tensor | None:
        """The pending trials' inputs (``early_stop``: at the full budget, where they head)."""
        if not self._pending:
            return None
        rows = []
        for proposal in self._pending.values():
            x = list(self._encoding.encode(proposal.config))
            if self.fidelity == EARLY_STOP:
                x.append(1.0)
            elif self.fidelity == MOMF:
                x.append(self._fidelity_input(proposal.budget))
            rows.append(x)
        return torch.tensor(rows, dtype=gp.DTYPE)

    def _reference_point(self, Y: torch.Tensor) -> torch.Tensor | None:
        """The hypervolume reference (maximised space): ``search.reference_point`` negated, else BoTorch's
        heuristic on ``Y``; None for a single objective."""
        if len(self._objectives) == 1:
            return None
        return self._reference if self._reference is not None else gp.reference_point(Y)

    def _fidelity_input(self, budget: float) -> float:
        """A budget as a model input: 0 at min_budget, 1 at max_budget, linear in log budget."""
        return math.log(budget / self.rungs[0]) / math.log(self._max_budget / self.rungs[0])

    # ------------------------------------------------------------------------------------------ configurations

    def _known_configs(self) -> set[str]:
        """Ids of the configurations with a told or a pending trial."""
        return set(self._by_config) | self._pending_configs()

    def _pending_configs(self) -> set[str]:
        return {key[0] for key in self._pending}

    def _highest_budget(self, config: dict[str, Any]) -> float:
        """The highest budget a configuration was told or is running at (0: none)."""
        cid = config_id(config)
        told = [o.budget for o in self._by_config.get(cid, [])]
        return max([*told, *(key[1] for key in self._pending if key[0] == cid)], default=0.0)

    def _latest_per_config(self) -> list[Observation]:
        """Each configuration's highest-budget observation."""
        return [max(told, key=lambda o: o.budget) for told in self._by_config.values()]

    def _next_rung(self, config: dict[str, Any]) -> float | None:
        """The rung a configuration would run next: the first for a new one, the one above its highest budget for a
        started one; None when it reached the maximum, crashed, or has a trial running."""
        cid = config_id(config)
        told = self._by_config.get(cid, [])
        if cid in self._pending_configs() or any(o.values is None for o in told):
            return None
        highest = max((o.budget for o in told), default=0.0)
        higher = [budget for budget in self.rungs if budget > highest and not math.isclose(budget, highest)]
        return higher[0] if higher else None

    def _fresh(self, config: dict[str, Any], budget: float) -> Proposal | None:
        """A proposal of ``config`` at ``budget``, unless the configuration was told or is running at that budget or
        a higher one (a configuration only ever climbs)."""
        if budget <= self._highest_budget(config):
            return None
        return Proposal(config, budget)

    def _random_proposal(self, budget: float) -> Proposal | None:
        """A configuration no trial has, sampled by ConfigSpace (seeded), at ``budget``."""
        space = copy.deepcopy(self._configspace)
        space.seed(self._ask_seed())
        known = self._known_configs()
        for _ in range(MAX_DRAWS):
            config = native_config(space.sample_configuration())
            if config_id(config) not in known:
                return Proposal(config, budget)
        return None

    def _ask_seed(self) -> int:
        """The seed of this ask: the search's seed and the number of trials told and pending."""
        return zlib.crc32(f"{self._seed}|{len(self._observations)}|{len(self._pending)}".encode())


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """torch's and Python's random generators seeded for a block (BoTorch's optimiser uses both), then restored."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)
