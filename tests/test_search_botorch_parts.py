"""The pieces ``BotorchStrategy`` is composed of, each on its own: the initial design, the told and pending trials,
each fidelity policy's decisions on a small scripted history, and the model's data and fit.

No model is fitted here: the policies' picks run against a scripted acquisition (what it proposes and what it
scores), so each test takes milliseconds.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fairnas.search import SearchSettings, load_space
from fairnas.search.encoding import SpaceEncoding
from fairnas.search.strategies.base import Proposal
from fairnas.search.trial import TrialOutcome, config_id
from tests.test_search_loop import ZDT1

pytest.importorskip("botorch", reason="needs the botorch extra: pip install -e '.[botorch]'")

from fairnas.search.strategies.botorch import FIDELITIES
from fairnas.search.strategies.botorch import model as gp
from fairnas.search.strategies.botorch.design import SobolDesign, initial_design_size
from fairnas.search.strategies.botorch.fidelity import POLICIES, EarlyStop, Fitted, FullBudget, Momf, rungs
from fairnas.search.strategies.botorch.fitting import ModelData, ModelFit, capped
from fairnas.search.strategies.botorch.trials import Trials

pytestmark = pytest.mark.extra("botorch")
ENCODING = SpaceEncoding(ZDT1.configspace())  # three floats x0..x2
RUNGS = [1.0, 2.0, 4.0]


def _config(x0, x1=0.5, x2=0.5):
    return {"x0": x0, "x1": x1, "x2": x2}


def _outcome(f1=0.5, f2=0.5, status="success"):
    return TrialOutcome({"f1": f1, "f2": f2}, status, 1.0)


def _trials(*told):
    """Trials told ``(config, budget, outcome)`` in order."""
    trials = Trials(ENCODING, RUNGS, ("f1", "f2"), (1000.0, 1000.0))
    for config, budget, outcome in told:
        trials.tell(config, budget, outcome)
    return trials


class ScriptedAcquisition:
    """An acquisition whose optimiser returns ``best`` (inputs, value) and whose value at a started configuration's
    inputs is ``scores[x0]``; records what it was built from."""

    def __init__(self, best=None, scores=None):
        self.encoding, self.best, self.scores, self.calls = ENCODING, best, scores or {}, []

    def improvement(self, model, X_baseline, Y_baseline, X_pending, seed):
        self.calls.append(("improvement", X_baseline, X_pending))
        return lambda inputs: torch.tensor([self.scores[round(float(x[0, 0]), 6)] for x in inputs])

    def momf(self, model, Y, X_pending, cost, seed):
        self.calls.append(("momf", cost(torch.tensor([[0.0], [0.5], [1.0]])).flatten().tolist(), X_pending))

    def maximize(self, acquisition, **fidelity):
        self.calls.append(("maximize", fidelity))
        return self.best


def _policy(fidelity, trials, acquisition=None, seed=0):
    return POLICIES[fidelity](RUNGS, 4.0, trials, acquisition or ScriptedAcquisition(), seed)


def _fitted(policy, trials, seed=7):
    """What the policy's pick works with, the model aside (the scripted acquisition needs none)."""
    data = ModelData(policy, ENCODING, "worst", None)
    observations = data.observations(trials.observations.values())
    X_pending = data.pending(trials.pending.values())
    return Fitted(None, data.inputs(observations), data.targets(observations), observations, X_pending, seed)


# ------------------------------------------------------------------------------------------------ initial design


def test_the_initial_design_size_follows_the_settings_or_the_inputs_and_the_expected_trials():
    def settings(**overrides):
        values = {"min_budget": 1, "max_budget": 4, "n_trials": 40, "final": {"seeds": 0}} | overrides
        return SearchSettings(ZDT1.objectives, **values)

    assert initial_design_size(settings(initial_design_size=5), dim=3) == 5
    assert initial_design_size(settings(), dim=3) == 8  # 2 x (3 + 1)
    assert initial_design_size(settings(n_trials=20), dim=3) == 5  # a quarter of the trials
    assert initial_design_size(settings(n_trials=None, total_budget=48), dim=3) == 3  # 12 full-budget trials
    assert initial_design_size(settings(n_trials=4), dim=3) == 2  # at least 2


def test_the_sobol_design_decodes_torchs_scrambled_sequence_through_the_encoding():
    design = SobolDesign(ENCODING, size=4, seed=3)
    engine = torch.quasirandom.SobolEngine(3, scramble=True, seed=3)
    expected = [ENCODING.from_unit_cube(engine.draw(1, dtype=torch.double)[0].numpy()) for _ in range(4)]
    assert design.initial() == expected and design.point(2) == expected[2]
    assert SobolDesign(ENCODING, size=4, seed=3).initial() == expected  # the seed decides it
    assert SobolDesign(ENCODING, size=4, seed=4).initial() != expected
    # further points: the first whose configuration no trial has, with its index in the sequence
    known = {config_id(config) for config in expected[:2]}
    assert design.next_unknown(known) == (2, expected[2])


def test_the_design_of_a_small_space_holds_each_configuration_once():
    space = load_space({"hyperparameters": {"x0": {"type": "categorical", "choices": [0.1, 0.5, 0.9], "key": "x0"}}})
    design = SobolDesign(SpaceEncoding(space.configspace), size=5, seed=0)
    configs = design.initial()
    assert sorted(c["x0"] for c in configs) == [0.1, 0.5, 0.9]  # three, not five: the rest repeat them
    assert design.next_unknown({config_id(c) for c in configs}) is None  # after MAX_DRAWS more points


# -------------------------------------------------------------------------------------------------- the trials


def test_trials_count_each_tell_once_and_crashes_as_unmeasured():
    a, b, c = _config(0.1), _config(0.2), _config(0.3)
    trials = _trials((a, 1.0, _outcome(0.2, 0.8)), (b, 1.0, _outcome(status="crashed")), (c, 1.0, _outcome(1000.0)))
    trials.tell(a, 1.0, _outcome(0.9, 0.9))  # replayed: not counted again
    assert [(o.config, o.values, o.order) for o in trials.observations.values()] == [
        (a, (0.2, 0.8), 0),
        (b, None, 1),
        (c, None, 2),  # a value at the crash cost counts as a crash
    ]
    assert np.allclose(next(iter(trials.observations.values())).x, [0.1, 0.5, 0.5])  # the configuration's inputs


def test_trials_know_each_configurations_budget_and_next_rung():
    a, b, c, d = _config(0.1), _config(0.2), _config(0.3), _config(0.4)
    trials = _trials((a, 1.0, _outcome()), (a, 2.0, _outcome()), (b, 4.0, _outcome()), (c, 1.0, _outcome(1000.0)))
    trials.ask(Proposal(d, 1.0))
    assert trials.known_configs() == {config_id(x) for x in (a, b, c, d)}
    assert [trials.highest_budget(x) for x in (a, b, c, d, _config(0.5))] == [2.0, 4.0, 1.0, 1.0, 0.0]
    assert [trials.next_rung(x) for x in (a, b, c, d, _config(0.5))] == [4.0, None, None, None, 1.0]
    assert [(o.config, o.budget) for o in trials.latest_per_config()] == [(a, 2.0), (b, 4.0), (c, 1.0)]
    assert trials.fresh(a, 2.0) is None and trials.fresh(a, 4.0) == Proposal(a, 4.0)  # a configuration only climbs
    trials.tell(d, 1.0, _outcome())
    assert trials.pending == {} and trials.next_rung(d) == 2.0


def test_a_random_proposal_is_seeded_and_never_a_known_configuration():
    trials = _trials((_config(0.1), 4.0, _outcome()))
    first = trials.random_proposal(4.0, seed=5)
    assert first == trials.random_proposal(4.0, seed=5) != trials.random_proposal(4.0, seed=6)
    trials.ask(first)
    assert config_id(trials.random_proposal(4.0, seed=5).config) != config_id(first.config)


# ----------------------------------------------------------------------------------------------- the policies


def test_each_fidelity_mode_has_a_policy_over_mo_ashas_rungs():
    assert list(POLICIES) == list(FIDELITIES)  # the settings' choices, in their order
    assert [POLICIES[name] for name in FIDELITIES] == [FullBudget, EarlyStop, Momf]
    assert rungs(1, 4, 2) == [1.0, 2.0, 4.0] and rungs(1, 10, 3) == [1.0, 3.0, 9.0, 10.0] and rungs(4, 4, 2) == [4.0]


def test_full_budget_fits_the_full_budget_trials_on_the_configuration_alone():
    a, b = _config(0.1), _config(0.2)
    trials = _trials((a, 1.0, _outcome()), (b, 4.0, _outcome(0.3, 0.7)), (a, 4.0, _outcome(0.6, 0.4)))
    policy = _policy("full", trials)
    assert policy.start_budget == policy.initial_budget(3) == 4.0 and policy.climb() is None
    observations = policy.model_observations(trials.observations.values())
    assert [(o.config, o.budget) for o in observations] == [(b, 4.0), (a, 4.0)] and policy.ready(observations)
    assert not policy.ready(observations[:1])
    assert policy.input_row(np.array([0.1, 0.2, 0.3]), 4.0) == pytest.approx([0.1, 0.2, 0.3])
    assert policy.pending_row(np.array([0.1, 0.2, 0.3]), 4.0) == pytest.approx([0.1, 0.2, 0.3])
    assert policy.target_row((0.3, 0.7), 4.0) == [-0.3, -0.7]
    # the initial design: its first configuration no trial has, at the full budget
    assert policy.initial_proposal([a, _config(0.7), _config(0.8)]) == Proposal(_config(0.7), 4.0)


def test_full_budget_proposes_the_acquisitions_pick_or_a_random_one_where_it_is_taken():
    a, b = _config(0.1), _config(0.2)
    trials = _trials((a, 4.0, _outcome(0.2, 0.8)), (b, 4.0, _outcome(0.8, 0.2)))
    acquisition = ScriptedAcquisition(best=(np.array([0.9, 0.5, 0.5]), 1.0))
    policy = _policy("full", trials, acquisition)
    assert policy.propose(_fitted(policy, trials)) == Proposal(_config(0.9), 4.0)
    assert acquisition.calls[-1] == ("maximize", {})  # no fidelity column
    acquisition.best = (np.array([0.1, 0.5, 0.5]), 1.0)  # a: already told at the full budget
    proposal = policy.propose(_fitted(policy, trials))
    assert proposal == trials.random_proposal(4.0, seed=7) and config_id(proposal.config) not in trials.known_configs()


def test_early_stop_climbs_every_rung_of_the_initial_design_one_at_a_time():
    a, b = _config(0.1), _config(0.2)
    trials = _trials()
    policy = _policy("early_stop", trials)
    asked = []
    for _ in range(6):
        proposal = policy.initial_proposal([a, b])
        trials.ask(proposal)
        asked.append((proposal.config["x0"], proposal.budget))
        trials.tell(proposal.config, proposal.budget, _outcome())
    assert asked == [(0.1, 1.0), (0.1, 2.0), (0.1, 4.0), (0.2, 1.0), (0.2, 2.0), (0.2, 4.0)]
    assert policy.initial_proposal([a, b]) is None
    # with a trial running, the next configuration starts meanwhile
    trials = _trials()
    policy = _policy("early_stop", trials)
    trials.ask(policy.initial_proposal([a, b]))
    assert policy.initial_proposal([a, b]) == Proposal(b, 1.0)


def test_early_stop_climbs_the_earliest_started_configuration_while_none_reached_the_full_budget():
    a, b, c = _config(0.1), _config(0.2), _config(0.3)
    trials = _trials((a, 1.0, _outcome(status="crashed")), (b, 1.0, _outcome()), (c, 2.0, _outcome()))
    policy = _policy("early_stop", trials)
    assert not policy.ready(policy.model_observations(trials.observations.values()))  # none at the full budget
    assert policy.climb() == Proposal(b, 2.0)  # a crashed: never continued
    trials.ask(Proposal(b, 2.0))
    assert policy.climb() == Proposal(c, 4.0)


def test_early_stop_sees_the_budget_and_puts_pending_trials_at_the_full_budget():
    policy = _policy("early_stop", _trials())
    x = np.array([0.1, 0.2, 0.3])
    assert [policy.input_row(x, budget)[-1] for budget in RUNGS] == pytest.approx([0.0, 0.5, 1.0])  # log scale
    assert policy.pending_row(x, 1.0) == pytest.approx([0.1, 0.2, 0.3, 1.0])
    assert policy.target_row((0.3, 0.7), 2.0) == [-0.3, -0.7] and policy.start_budget == 1.0


@pytest.mark.parametrize(
    ("new", "score_a", "score_b", "expected"),
    [
        (1.0, 0.0, 0.0, (0.9, 1.0)),  # the new configuration: 1 - log 4 beats 0 - log 3 and 0 - log 2
        (-5.0, 0.0, 0.0, (0.2, 4.0)),  # b, at 2 epochs: 2 to go beats a's 3 to go at the same score
        (-5.0, 0.5, 0.0, (0.1, 2.0)),  # a: 0.5 - log 3 > 0 - log 2
    ],
)
def test_early_stop_picks_the_higher_log_improvement_per_epoch_still_to_train(new, score_a, score_b, expected):
    a, b, c = _config(0.1), _config(0.2), _config(0.3)
    trials = _trials((a, 1.0, _outcome(0.2, 0.8)), (b, 2.0, _outcome(0.8, 0.2)), (c, 4.0, _outcome(0.5, 0.5)))
    acquisition = ScriptedAcquisition(best=(np.array([0.9, 0.5, 0.5, 1.0]), new), scores={0.1: score_a, 0.2: score_b})
    policy = _policy("early_stop", trials, acquisition)
    proposal = policy.propose(_fitted(policy, trials))
    assert (proposal.config["x0"], proposal.budget) == expected
    (_, baseline, _), (_, fidelity) = acquisition.calls
    assert baseline.shape == (1, 4) and baseline[0, -1] == 1.0  # qLogNEHVI over the full-budget trials
    assert fidelity == {"fixed": {3: 1.0}, "n_extra": 1}  # at the full budget


def test_early_stop_takes_a_started_configuration_the_optimiser_lands_on_one_rung_up():
    a, c = _config(0.1), _config(0.3)
    trials = _trials((a, 1.0, _outcome(0.2, 0.8)), (c, 4.0, _outcome(0.5, 0.5)))
    acquisition = ScriptedAcquisition(best=(np.array([0.1, 0.5, 0.5, 1.0]), 5.0), scores={0.1: -9.0})
    policy = _policy("early_stop", trials, acquisition)
    assert policy.propose(_fitted(policy, trials)) == Proposal(a, 2.0)
    trials.ask(Proposal(a, 2.0))  # now running: a random configuration at the first rung instead
    proposal = policy.propose(_fitted(policy, trials))
    assert proposal.budget == 1.0 and config_id(proposal.config) not in trials.known_configs()


def test_momf_draws_initial_rungs_inversely_to_their_cost_and_adds_the_trust_objective():
    policy = _policy("momf", _trials(), seed=1)
    draws = [policy.initial_budget(index) for index in range(2000)]
    shares = [draws.count(budget) / len(draws) for budget in RUNGS]
    assert shares == pytest.approx([4 / 7, 2 / 7, 1 / 7], abs=0.03)  # weights 1, 1/2, 1/4
    assert draws == [_policy("momf", _trials(), seed=1).initial_budget(index) for index in range(2000)]
    assert draws != [_policy("momf", _trials(), seed=2).initial_budget(index) for index in range(2000)]
    assert policy.target_row((0.3, 0.7), 2.0) == [-0.3, -0.7, 0.5]
    assert policy.pending_row(np.array([0.1, 0.2, 0.3]), 2.0) == pytest.approx([0.1, 0.2, 0.3, 0.5])
    low = _trials((_config(0.1), 1.0, _outcome()), (_config(0.2), 2.0, _outcome())).observations.values()
    low = policy.model_observations(low)
    assert policy.ready(low) and not _policy("full", _trials()).ready(low)  # any budgets will do


@pytest.mark.parametrize(("code", "value", "budget"), [(0.5, 0.2, 2.0), (1.0, 0.2, 4.0), (1.0, 0.0, 1.0)])
def test_momf_proposes_the_acquisitions_configuration_and_rung(code, value, budget):
    trials = _trials((_config(0.1), 1.0, _outcome(0.2, 0.8)), (_config(0.2), 2.0, _outcome(0.8, 0.2)))
    acquisition = ScriptedAcquisition(best=(np.array([0.9, 0.5, 0.5, code]), value))
    policy = _policy("momf", trials, acquisition)
    assert policy.propose(_fitted(policy, trials)) == Proposal(_config(0.9), budget)  # no improvement: the first rung
    (_, cost, _), (_, fidelity) = acquisition.calls
    assert cost == pytest.approx([1.0, 2.0, 4.0])  # the rung's epochs
    assert fidelity == {"extra_discrete": {3: pytest.approx([0.0, 0.5, 1.0])}, "n_extra": 1}


# ------------------------------------------------------------------------------------------ the model's data


def test_the_model_data_takes_crashed_trials_at_the_worst_value_or_leaves_them_out():
    a, b, c = _config(0.1), _config(0.2), _config(0.3)
    trials = _trials((a, 4.0, _outcome(0.2, 0.9)), (b, 4.0, _outcome(status="crashed")), (c, 4.0, _outcome(0.6, 0.1)))
    policy = _policy("full", trials)
    worst = ModelData(policy, ENCODING, "worst", None).observations(trials.observations.values())
    assert [o.values for o in worst] == [(0.2, 0.9), (0.6, 0.9), (0.6, 0.1)]
    exclude = ModelData(policy, ENCODING, "exclude", None).observations(trials.observations.values())
    assert [o.values for o in exclude] == [(0.2, 0.9), (0.6, 0.1)]


def test_the_model_data_keeps_half_the_front_and_the_most_recent_under_the_cap():
    values = [(0.0, 1.0), (1.0, 0.0), (0.5, 0.5), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)]  # three non-dominated
    trials = _trials(*[(_config(i / 10), 4.0, _outcome(f1, f2)) for i, (f1, f2) in enumerate(values)])
    observations = list(trials.observations.values())
    assert [o.values for o in capped(observations, 4)] == [(1.0, 0.0), (0.5, 0.5), (5, 5), (6, 6)]
    assert capped(observations, None) == capped(observations, 8) == observations


@pytest.mark.parametrize(("fidelity", "inputs", "targets"), [("full", 3, 2), ("early_stop", 4, 2), ("momf", 4, 3)])
def test_the_model_data_has_the_policys_columns(fidelity, inputs, targets):
    a, b = _config(0.1), _config(0.2)
    trials = _trials((a, 1.0, _outcome(0.2, 0.8)), (a, 4.0, _outcome(0.3, 0.6)), (b, 2.0, _outcome(0.8, 0.2)))
    trials.ask(Proposal(b, 4.0))
    policy = _policy(fidelity, trials)
    data = ModelData(policy, ENCODING, "worst", None)
    observations = data.observations(trials.observations.values())
    X, Y = data.inputs(observations), data.targets(observations)
    n = 1 if fidelity == "full" else 3
    assert X.shape == (n, inputs) and Y.shape == (n, targets) and X.dtype == Y.dtype == torch.double
    assert Y[-1, :2].tolist() == ([-0.3, -0.6] if fidelity == "full" else [-0.8, -0.2])
    pending = data.pending(trials.pending.values())
    assert pending.shape == (1, inputs) and pending[0, 0].item() == pytest.approx(0.2)
    assert ModelData(policy, ENCODING, "worst", None).pending([]) is None


def test_the_hyperparameters_are_fitted_every_refit_every_suggestions_and_kept_through_a_failed_fit(monkeypatch):
    fitted = []  # per fit: were the hyperparameters fitted (or set from the last fit)?

    def fit_model(X, Y, encoding, *, maxiter, hyperparameters=None):
        fitted.append(hyperparameters is None)
        if len(fitted) == 4:
            raise gp.ModelFittingError("scripted")
        return SimpleNamespace(fit=len(fitted))

    monkeypatch.setattr(gp, "fit_model", fit_model)
    monkeypatch.setattr(gp, "hyperparameters", lambda model: {"fit": torch.tensor(model.fit)})
    fit = ModelFit(ENCODING, fit_maxiter=5, refit_every=3)
    X, Y = torch.zeros(2, 3, dtype=torch.double), torch.zeros(2, 2, dtype=torch.double)
    for _ in range(3):
        fit.fit(X, Y)
    with pytest.raises(gp.ModelFittingError):
        fit.fit(X, Y)
    assert fit.hyperparameters == {"fit": torch.tensor(1)}  # kept
    for _ in range(3):
        fit.fit(X, Y)
    assert fitted == [True, False, False, True, False, False, True] and fit.suggestions == 7
    assert fit.hyperparameters == {"fit": torch.tensor(7)}
