"""W&B logging of a search: trial runs in the search's group and a summary run, offline."""

import json
import re

import pytest

from fairnas.search import run_search
from fairnas.search.analytic import NoisyMultiFidelityProblem
from fairnas.search.wandb_summary import log_search_to_wandb

ZDT1 = NoisyMultiFidelityProblem("zdt1", n_variables=3)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return run_search(
        ZDT1,
        ZDT1.configspace(),
        objectives=ZDT1.objectives,
        min_budget=1,
        max_budget=4,
        strategy="random",
        output_dir=tmp_path_factory.mktemp("search"),
        n_trials=3,
    )


def test_offline_run_directories_hold_trials_and_the_pareto_table(result, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default
    wandb_dir = log_search_to_wandb(result, "zdt1-demo")
    assert wandb_dir == result.output_dir / "wandb"
    runs = sorted(path.name for path in wandb_dir.glob("offline-run-*"))
    assert len(runs) == 4 and sum(name.endswith("-summary") for name in runs) == 1
    summary = next(wandb_dir.glob("offline-run-*-summary"))
    tables = {
        re.sub(r"_\d+_[0-9a-f]+\.table\.json$", "", path.name): path
        for path in summary.glob("files/media/table/*.table.json")
    }
    assert set(tables) == {"pareto_front", "trials", "hypervolume_curve_table"}
    front = json.loads(tables["pareto_front"].read_text())
    assert len(front["data"]) == len(result.pareto_front) and {"f1", "f2", "config_id"} <= set(front["columns"])
    assert list(summary.glob("files/media/images/pareto_scatter_*.png"))


def test_disabled_logging_writes_nothing(result):
    before = set(result.output_dir.iterdir())
    assert log_search_to_wandb(result, "zdt1-demo", enabled=False) is None
    assert set(result.output_dir.iterdir()) == before
