"""bench.comparison.methods: the benchmark method ``default`` is what search.py runs given no strategy settings,
read from the composed config, so a verdict on it is a verdict on the shipped default."""

from __future__ import annotations

import dataclasses

import pytest

from bench.comparison import methods
from fairnas import config
from fairnas.search.settings import FinalSettings, SearchSettings


@pytest.fixture
def fresh_default():
    methods.shipped.cache_clear()
    yield
    methods.shipped.cache_clear()


def test_the_default_method_is_the_composed_search_config_with_its_final_stage(fresh_default):
    search = config.compose_config("search", []).search
    settings = SearchSettings.from_section(search)
    default, alone = methods.method("default"), methods.method("default_search")
    assert default.strategy == alone.strategy == settings.strategy
    assert default.settings["options"] == dataclasses.asdict(settings.options) == alone.settings["options"]
    assert default.final and default.final_settings == settings.final and default.final_settings.seeds > 0
    assert not alone.final and alone.final_settings is None
    assert default.continuing is bool(search["continue_across_fidelities"])


def test_the_default_method_follows_the_config_when_the_default_changes(fresh_default, monkeypatch):
    compose = config.compose_config

    def changed(name, overrides, **kwargs):
        assert name == "search" and list(overrides) == []
        return compose(name, ["search.strategy=nsga2", "search.final.top_k=5", "search.final.seeds=1"], **kwargs)

    monkeypatch.setattr(config, "compose_config", changed)
    default = methods.method("default")
    assert default.strategy == "nsga2" and default.final_settings == FinalSettings(top_k=5, seeds=1, answer="observed")
    assert default.settings["options"]["population_size"] > 0 and default.label == "the default, as search.py ships it"
    methods.shipped.cache_clear()
    monkeypatch.setattr(config, "compose_config", lambda name, overrides, **kw: compose(name, ["search.final.seeds=0"]))
    assert not methods.method("default").final  # a default without a final stage is one
