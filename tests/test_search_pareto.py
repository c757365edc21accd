"""Pareto fronts and hypervolume (fairnas.search.pareto, fairnas.search.hypervolume)."""

import numpy as np
import pandas as pd
import pytest

from fairnas.search import hypervolume, non_dominated_mask, pareto_front
from fairnas.search.hypervolume import default_reference_point, hypervolume_curve


def test_non_dominated_mask_keeps_ties_and_drops_dominated_points():
    points = np.array([[0.2, 0.8], [0.5, 0.5], [0.8, 0.2], [0.6, 0.6], [0.5, 0.5], [0.2, 0.9]])
    assert non_dominated_mask(points).tolist() == [True, True, True, False, True, False]
    with pytest.raises(ValueError, match="2-D array"):
        non_dominated_mask(np.zeros(3))


def test_hypervolume_of_a_staircase_and_points_beyond_the_reference():
    front = np.array([[0.2, 0.8], [0.5, 0.5], [0.8, 0.2]])
    # union of [0.2,1]x[0.8,1], [0.5,1]x[0.5,1], [0.8,1]x[0.2,1]
    assert hypervolume(front, [1.0, 1.0]) == pytest.approx(0.16 + 0.15 + 0.06)
    assert hypervolume(np.vstack([front, [[1.5, 0.0], [0.6, 0.6]]]), [1.0, 1.0]) == pytest.approx(0.37)
    assert hypervolume(np.empty((0, 2)), [1.0, 1.0]) == 0.0
    assert hypervolume(np.array([[0.5, 0.5, 0.5]]), [1.0, 1.0, 1.0]) == pytest.approx(0.125)


def test_default_reference_point_adds_a_margin_of_the_range():
    reference = default_reference_point(np.array([[0.0, 2.0], [1.0, 2.0]]))
    assert reference.tolist() == pytest.approx([1.1, 2.1])


def _trials():
    return pd.DataFrame(
        {
            "budget": [1.0, 4.0, 4.0, 4.0, 4.0, 2.0],
            "status": ["success", "success", "success", "crashed", "success", "success"],
            "error": [0.0, 0.3, 0.2, 1000.0, 0.4, 0.0],
            "disparity": [0.0, 0.3, 0.6, 1000.0, 0.5, 0.0],
        }
    )


def test_pareto_front_uses_successful_trials_at_the_maximum_budget_only():
    front = pareto_front(_trials(), ["error", "disparity"], max_budget=4.0)
    assert front[["error", "disparity"]].values.tolist() == [[0.2, 0.6], [0.3, 0.3]]


def test_hypervolume_curve_grows_with_consumed_budget_and_records_the_reference():
    curve = hypervolume_curve(_trials(), ["error", "disparity"], 4.0, [1.0, 1.0])
    assert curve["consumed_budget"].tolist() == [1.0, 5.0, 9.0, 13.0, 17.0, 19.0]
    assert curve["front_size"].tolist() == [0, 1, 2, 2, 2, 2]
    assert curve["hypervolume"].tolist() == pytest.approx([0.0, 0.49, 0.49 + 0.1 * 0.4, 0.53, 0.53, 0.53])
    assert (curve["ref_error"] == 1.0).all() and (curve["ref_disparity"] == 1.0).all()
    with pytest.raises(ValueError, match="reference_point has 1 values"):
        hypervolume_curve(_trials(), ["error", "disparity"], 4.0, [1.0])
