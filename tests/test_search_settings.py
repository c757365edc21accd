"""SearchSettings: normalisation, one-line errors naming the search.<key>, building from a mapping."""

import dataclasses
import json

import pytest
from omegaconf import OmegaConf

from fairnas.config import compose_config
from fairnas.search import SearchSettings
from fairnas.search.settings import MOVED
from fairnas.search.strategies import REGISTRY

VALID = {"objectives": ["f1", "f2"], "min_budget": 1, "max_budget": 4, "n_trials": 12}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_budget": 5}, "search.min_budget=5.0, search.max_budget=4.0"),
        ({"eta": 1}, "search.eta=1 must be an integer >= 2"),
        ({"eta": 2.5}, "search.eta=2.5 must be an integer >= 2"),
        ({"n_trials": None}, "give search.n_trials or search.total_budget"),
        ({"total_budget": -1}, "search.total_budget=-1 must be a positive number"),
        ({"options": {"rho": "high"}}, "search.smac.rho='high' must be a number >= 0"),
        ({"options": {"rho": -1}}, "search.smac.rho=-1 must be a number >= 0"),
        ({"strategy": "grid"}, f"search.strategy='grid' must be one of {list(REGISTRY)}"),
        ({"options": {"scheduler": "asha"}}, "search.smac.scheduler='asha' must be one of"),
        ({"options": {"multi_objective": "nsga2"}}, "search.smac.multi_objective='nsga2' must be one of"),
        ({"options": {"objective_weights": [1, 1]}}, "search.smac.objective_weights need search.smac.multi_objective"),
        (
            {"options": {"objective_weights": [1], "multi_objective": "mean"}},
            "search.smac.objective_weights=[1.0] must be 2 non-negative numbers",
        ),
        ({"options": {"etta": 3}}, "unknown search.smac settings ['etta']; allowed: ['scheduler', "),
        ({"strategy": "random", "options": {"rho": 1}}, "search.strategy=random takes no options, got {'rho': 1}"),
        ({"crash_cost": [1.0]}, "search.crash_cost=[1.0] must be one finite number or one per objective"),
        ({"crash_cost": None}, "search.crash_cost=None must be a number or a list of numbers"),
        ({"fail_fast": -1}, "search.fail_fast=-1 must be an integer >= 0"),
        ({"fail_fast": True}, "search.fail_fast=True must be an integer >= 0"),
        ({"reference_point": [1.0]}, "search.reference_point has 1 values"),
        ({"objectives": "f1"}, "search.objectives='f1' must be a list"),
        (
            {"objectives": ["f1", "f1"]},
            "search.objectives=['f1', 'f1'] must be a non-empty list of distinct metric names",
        ),
        ({"objectives": ["f1", "status"]}, "search.objectives ['status'] are reserved trials.csv columns"),
        ({"n_workers": 0}, "search.n_workers=0 must be a positive integer"),
        ({"dask_address": "tcp://a:1", "dask_scheduler_file": "s.json"}, "give search.dask_address or"),
        ({"options": {"n_seeds": 0}}, "search.smac.n_seeds=0 must be a positive integer"),
        ({"options": {"brackets": []}}, "search.smac.brackets=[] must be a non-empty list of bracket indices"),
        ({"options": {"brackets": [0.5]}}, "search.smac.brackets=0.5 must be an integer"),
        (
            {"options": {"brackets": [0, 3]}},
            "search.smac.brackets=[0, 3] must be indices from -3 to 2 (Hyperband has 3 brackets over budgets 1-4 at "
            "eta 2)",
        ),
        (
            {"options": {"brackets": [0], "scheduler": "successive_halving"}},
            "search.smac.brackets=[0] must be null or [0, -1] unless smac.scheduler=hyperband and smac.n_seeds=1",
        ),
        ({"final": {"seeds": 1.5}}, "search.final.seeds=1.5 must be an integer >= 0"),
        ({"final": {"top_k": 0}}, "search.final.top_k=0 must be a positive integer"),
        ({"final": {"k": 2}}, "unknown search.final settings ['k']; allowed: ['top_k', 'seeds', 'answer']"),
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


def test_moved_keys_are_named_with_their_new_key_in_one_line():
    for key, new in MOVED.items():
        with pytest.raises(ValueError) as error:
            SearchSettings.from_mapping({**VALID, key: 3})
        assert str(error.value) == f"search.{key} is now search.{new}"
    assert SearchSettings.from_mapping({**VALID, **dict.fromkeys(MOVED)}) == SearchSettings(**VALID)  # null: unset


def test_the_strategy_section_becomes_its_options_and_every_other_section_is_checked():
    mapping = {**VALID, "strategy": "nsga2", "nsga2": {"population_size": 4}, "smac": {"rho": 0.5}}
    assert SearchSettings.from_mapping(mapping).options.population_size == 4
    with pytest.raises(ValueError, match=r"^search.smac.rho=-1 must be a number >= 0$"):
        SearchSettings.from_mapping({**mapping, "smac": {"rho": -1}})


def test_smac_keeps_hyperbands_first_and_last_brackets_by_default_and_every_bracket_in_the_papers_search():
    assert compose_config("search", [], output_dir=".").search.smac.brackets == [0, -1]
    assert compose_config("search", ["search=paper"], output_dir=".").search.smac.brackets is None
    # the default is inert where Hyperband does not run, so those set-ups need no second flag
    for options in ({"scheduler": "successive_halving"}, {"n_seeds": 2}):
        assert SearchSettings(**{**VALID, "options": options}).options.brackets == (0, -1)


@pytest.mark.parametrize("name", [name for name, entry in REGISTRY.items() if entry.options is not None])
def test_each_strategy_with_options_has_its_config_file_with_every_option(name):
    search = compose_config("search", [f"search.strategy={name}"], output_dir=".").search
    fields = [field.name for field in dataclasses.fields(REGISTRY[name].options)]
    assert list(search[name]) == fields
    settings = SearchSettings.from_mapping({key: search[key] for key in SearchSettings.field_names() if key in search})
    assert settings.options == REGISTRY[name].options.from_mapping(None)  # the file holds the defaults


def test_lists_of_an_omegaconf_node_become_tuples_and_numbers_floats():
    lists = {"crash_cost": [10, 50], "reference_point": [2, 9]}
    smac = {"objective_weights": [1, 3], "multi_objective": "mean"}
    settings = SearchSettings.from_mapping(OmegaConf.create({**VALID, **lists, "smac": smac}))
    assert settings.objectives == ("f1", "f2") and settings.reference_point == (2.0, 9.0)
    assert settings.crash_cost == settings.crash_costs == (10.0, 50.0)
    assert settings.options.objective_weights == (1.0, 3.0)
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
            "crash_cost": [1000.0, 1000.0],
            "seed": 3,
            "scheduler": "hyperband",  # the strategy's own, by their names, as older search.json files hold them
            "multi_objective": "parego",
            "rho": 0.05,
            "objective_weights": None,
            "n_seeds": 1,
            "brackets": [0, -1],
        }
    )
    nsga2 = SearchSettings(**VALID, strategy="nsga2", options={"population_size": 4}).resume_invariant()
    assert nsga2["population_size"] == 4 and "rho" not in nsga2


@pytest.mark.parametrize(("max_budget", "eta"), [(4, 2), (8, 2), (100, 10), (1000, 10), (243, 3), (4, 3)])
def test_smac_brackets_are_counted_as_smac_counts_them(max_budget, eta):
    from smac.intensifier.successive_halving import SuccessiveHalving

    from fairnas.search.strategies.smac import n_brackets

    settings = SearchSettings(**{**VALID, "max_budget": max_budget, "eta": eta})
    assert n_brackets(settings) == SuccessiveHalving._get_max_iterations(eta, max_budget, 1) + 1
