"""The initial design of ``search.strategy=botorch``: the first ``search.initial_design_size`` distinct configurations
of a scrambled Sobol sequence over the model's inputs (seeded by ``search.seed``), each point decoded by
:meth:`~fairnas.search.encoding.SpaceEncoding.from_unit_cube`, so conditions hold. While the model lacks data to fit,
the sequence goes on (:meth:`SobolDesign.next_unknown`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from fairnas.search.encoding import SpaceEncoding
from fairnas.search.trial import config_id

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings

MAX_DRAWS = 100
"""Draws (Sobol points, random samples) that may all hit known configurations before none is proposed."""


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


class SobolDesign:
    """The configurations of a scrambled Sobol sequence over the unit cube of ``encoding``'s inputs (``seed``), in
    sequence order; its first ``size`` distinct ones are the initial design."""

    def __init__(self, encoding: SpaceEncoding, size: int, seed: int):
        self.size = size
        self._encoding = encoding
        self._engine = torch.quasirandom.SobolEngine(max(encoding.dim, 1), scramble=True, seed=seed)
        self._points: list[dict[str, Any]] = []  # decoded, in sequence order
        self._initial: list[dict[str, Any]] | None = None

    def point(self, index: int) -> dict[str, Any]:
        """The configuration of the ``index``-th point of the sequence."""
        while len(self._points) <= index:
            u = self._engine.draw(1, dtype=torch.double)[0, : self._encoding.dim].numpy()
            self._points.append(self._encoding.from_unit_cube(u))
        return self._points[index]

    def initial(self) -> list[dict[str, Any]]:
        """The first ``size`` distinct configurations of the sequence (fewer when ``MAX_DRAWS`` more points repeat
        them: a small space)."""
        if self._initial is None:
            design: dict[str, dict[str, Any]] = {}
            for index in range(self.size + MAX_DRAWS):
                if len(design) == self.size:
                    break
                config = self.point(index)
                design.setdefault(config_id(config), config)
            self._initial = list(design.values())
        return self._initial

    def next_unknown(self, known: set[str]) -> tuple[int, dict[str, Any]] | None:
        """The first configuration of the sequence whose id is not in ``known``, with its index; None when the next
        ``MAX_DRAWS`` points hit known ones."""
        for index in range(len(self._points) + MAX_DRAWS):
            config = self.point(index)
            if config_id(config) not in known:
                return index, config
        return None
