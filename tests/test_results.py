"""Results as data: the README's result tables are rendered from the committed CSVs under results/, and a README
that drifts from its data fails here; a finished study's tables are collected into a results folder with a manifest
that says how they were made."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fairnas import results
from fairnas.study import claims as verdicts

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_tables_are_rendered_from_the_committed_data():
    readme = (REPO / "README.md").read_text()
    assert results.drifted(readme) == [], "run: python -m fairnas.results render"
    for folder, _ in results.TABLES.values():
        manifest = results.read_manifest(REPO / folder)
        assert {"command", "commit", "finished", "machine"} <= set(manifest)
        assert all((REPO / folder / name).is_file() for name in manifest["files"])


def write_study(folder: Path) -> None:
    """A finished study's folder as study.py leaves it: claims.csv, a stage table, report.md, the search's tables."""
    rows = [
        {
            "id": "final/dominates/default/test",
            "stage": "final",
            "claim": "the searched model dominates default DPN (test)",
            "family": "primary",
            "verdict": "holds",
            "n": 7,
            "metric": "test/error",
            "effect": -0.05,
            "ci_low": -0.08,
            "ci_high": -0.02,
            "p_holm": 0.004,
        },
        {
            "id": "robustness/adverm/default/val",
            "stage": "robustness",
            "claim": "AdvERM lowers the val robustness bias of default DPN",
            "family": "exploratory",
            "verdict": "does not hold",
            "n": 5,
            "metric": "val/robustness_bias",
            "effect": 0.001,
            "ci_low": -0.01,
            "ci_high": 0.012,
            "p_holm": float("nan"),
        },
    ]
    (folder / "search").mkdir(parents=True)
    pd.DataFrame(rows).reindex(columns=verdicts.COLUMNS).to_csv(folder / "claims.csv", index=False)
    pd.DataFrame({"model": ["default DPN"], "val/error_mean": [0.5]}).to_csv(folder / "final.csv", index=False)
    pd.DataFrame({"seed": [0, 0]}).to_csv(folder / "search" / "trials.csv", index=False)
    (folder / "report.md").write_text("# study\n\n- **stages (minutes)**: noise 5.2, final 20.5\n")
    (folder.parent / "study.log").write_text(
        "...\n\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:52:30\n\tMaximum resident set size (kbytes): 4718592\n"
    )


def test_a_finished_study_is_collected_with_its_manifest_and_rendered(tmp_path, monkeypatch):
    write_study(tmp_path / "study")
    target = tmp_path / "results" / "showcase"
    manifest = results.collect_study(
        tmp_path / "study",
        target,
        command="python study.py experiment=showcase",
        commit="abc1234",
        time_log=tmp_path / "study.log",
    )
    assert json.loads((target / "manifest.json").read_text()) == manifest
    assert manifest["stage_minutes"] == {"noise": 5.2, "final": 20.5}
    assert manifest["wall_minutes"] == 112.5 and manifest["peak_memory_gb"] == 4.5
    assert set(manifest["files"]) == {"claims.csv", "final.csv", "search_trials.csv"}
    assert all((target / name).is_file() for name in manifest["files"])

    monkeypatch.setitem(results.TABLES, "claims", ("results/showcase", results.claims_table))
    readme = "intro\n<!-- results:claims -->\nstale numbers\n<!-- /results:claims -->\nafter\n"
    assert results.drifted(readme, root=tmp_path) == ["claims"]
    rendered = results.render(readme, root=tmp_path)
    assert results.drifted(rendered, root=tmp_path) == [] and rendered.endswith("-->\nafter\n")
    table = rendered.split("<!-- results:claims -->\n", 1)[1].split("\n<!-- /results:claims -->")[0]
    assert (
        "| the searched model dominates default DPN (test) | 7 | error -0.05 [-0.08, -0.02] | 0.004 | **holds** |"
        in table
    )
    assert "AdvERM" not in table.split("\n\n")[0]  # exploratory claims are counted below the table, not listed
    assert "1 does not hold" in table and "commit abc1234" in table and "112 min wall" in table


def test_a_readme_without_the_block_or_a_folder_without_a_study_is_named(tmp_path):
    with pytest.raises(ValueError, match="no block <!-- results:claims -->"):
        results.render("no markers here\n")
    with pytest.raises(FileNotFoundError, match="holds no finished study"):
        results.collect_study(tmp_path, tmp_path / "out", command="python study.py")
