"""SearchSettings: normalisation, one-line errors naming the search.<key>, building from a mapping."""

import json

import pytest
from omegaconf import OmegaConf

from fairnas.search import SearchSettings

VALID = {"objectives": ["f1", "f2"], "min_budget": 1, "max_budget": 4, "n_trials": 12}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_budget": 5}, "search.min_budget=5.0, search.max_budget=4.0"),
        ({"eta": 1}, "search.eta must be an integer >= 2, got 1"),
        ({"eta": 2.5}, "search.eta must be an integer >= 2, got 2.5"),
        ({"n_trials": None}, "give search.n_trials or search.total_budget"),
        ({"total_budget": -1}, "search.total_budget must be > 0, got -1.0"),
        ({"rho": "high"}, "search.rho must be a number, got 'high'"),
        (
            {"strategy": "grid"},
            "unknown search.strategy 'grid'; allowed: ['smac', 'random', 'moasha', 'nsga2', 'botorch']",
        ),
        ({"scheduler": "asha"}, "unknown search.scheduler 'asha'"),
        ({"multi_objective": "nsga2"}, "unknown search.multi_objective 'nsga2'"),
        ({"objective_weights": [1, 1]}, "search.objective_weights need search.multi_objective='mean'"),
        ({"crash_cost": [1.0]}, "search.crash_cost must be one finite number or one per objective"),
        ({"crash_cost": None}, "search.crash_cost must be a number or a list of numbers, got None"),
        ({"reference_point": [1.0]}, "search.reference_point has 1 values"),
        ({"objectives": "f1"}, "search.objectives must be a list, got 'f1'"),
        ({"objectives": ["f1", "f1"]}, "search.objectives must be a non-empty list of distinct metric names"),
        ({"objectives": ["f1", "status"]}, "search.objectives ['status'] are reserved trials.csv columns"),
        ({"n_workers": 0}, "search.n_workers must be an integer >= 1, got 0"),
        ({"dask_address": "tcp://a:1", "dask_scheduler_file": "s.json"}, "give search.dask_address or"),
        ({"n_seeds": 0}, "search.n_seeds must be an integer >= 1, got 0"),
        ({"n_seeds": 3, "strategy": "nsga2"}, "search.n_seeds=3 needs search.strategy=smac"),
        ({"final": {"seeds": 1.5}}, "search.final.seeds must be an integer >= 0, got 1.5"),
        ({"final": {"top_k": 0}}, "search.final.top_k must be an integer >= 1, got 0"),
        ({"final": {"k": 2}}, "unknown search.final settings ['k']; allowed: ['top_k', 'seeds']"),
    ],
)
def test_a_bad_setting_is_named_in_a_one_line_error(overrides, message):
    with pytest.raises(ValueError) as error:
        SearchSettings(**{**VALID, **overrides})
    assert message in str(error.value) and "\n" not in str(error.value)


def test_from_mapping_names_unknown_and_missing_keys():
    with pytest.raises(ValueError, match=r"unknown search settings \['etta'\]; allowed: \['objectives', .*'eta'"):
        SearchSettings.from_mapping({**VALID, "etta": 3})
    with pytest.raises(ValueError, match=r"search settings lack \['min_budget', 'max_budget'\]"):
        SearchSettings.from_mapping({"objectives": ["f1"], "n_trials": 3})


def test_lists_of_an_omegaconf_node_become_tuples_and_numbers_floats():
    lists = {"crash_cost": [10, 50], "reference_point": [2, 9], "objective_weights": [1, 3]}
    settings = SearchSettings.from_mapping(OmegaConf.create({**VALID, **lists, "multi_objective": "mean"}))
    assert settings.objectives == ("f1", "f2") and settings.reference_point == (2.0, 9.0)
    assert settings.crash_cost == settings.crash_costs == (10.0, 50.0) and settings.objective_weights == (1.0, 3.0)
    assert isinstance(settings.min_budget, float) and isinstance(settings.n_trials, int)
    with pytest.raises(AttributeError):
        settings.eta = 3  # frozen


def test_resume_invariant_settings_are_what_search_json_holds():
    invariant = SearchSettings(**VALID, seed=3, n_workers=2).resume_invariant()
    assert (
        json.loads(json.dumps(invariant))
        == invariant
        == {
            "strategy": "smac",
            "objectives": ["f1", "f2"],
            "min_budget": 1.0,
            "max_budget": 4.0,
            "eta": 2,
            "scheduler": "hyperband",
            "multi_objective": "parego",
            "rho": 0.05,
            "objective_weights": None,
            "crash_cost": [1000.0, 1000.0],
            "seed": 3,
            "population_size": 20,
            "n_seeds": 1,
        }
    )
