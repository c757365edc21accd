"""The benchmark problems the search strategies are compared on, by name (``bench/search_efficiency.py --problem``).

- ``analytic``: ``NoisyMultiFidelityProblem`` (ZDT1 on [0, 1]^4, noise sd 0.3 / budget), budgets 1 to 8
  "epochs" with eta = 2; reference point (1.1, 11): the objective box [0, 1] x [0, 10] plus 10 %. Its maximum
  hypervolume is that of the noise-free front f2 = 1 - sqrt(f1): 1.1 x 11 - 1/3 (the noise only adds).
- ``momf_branin_currin``, ``momf_park``: BoTorch's multi-objective multi-fidelity test problems (Irshad et al.
  2021; :mod:`fairnas.benchmarks.botorch_problems`), budgets 1 to 8 epochs mapped linearly onto the fidelity input,
  eta = 2, BoTorch's reference point and maximum hypervolume (``max_hv``). BoTorch is imported only when one of
  them is built.
- ``table``: the tabular benchmark of the embedded problem (:mod:`fairnas.benchmarks.tables`, ``dpn_showcase_noisy``):
  look-ups of every configuration's per-epoch validation metrics, maximum hypervolume that of the table's front.
- ``table6``: the same 81 configurations with 6 training seeds each (``dpn_showcase_noisy6``), so that a search
  reading 3 (its trials', then the final stage's 2) is judged on 3 it never read; on ``table`` a search may read 1
  and is judged on 2.
- ``paper_table``: the 337 configurations of the paper's whole space that the surrogate is fitted to, each with at
  least 4 training seeds and its best quarter with more (``dpn_paper_table``): the real landscape of the paper's
  space, searched directly. A search reads each configuration's seeds in one order per search seed (the seeds every
  configuration has first, :class:`~fairnas.benchmarks.answer_quality.Truth`), at most 3 of them; the rest (one, two
  in the best quarter) judge its answer.
- ``surrogate``: the surrogate benchmark of the paper's whole space (:mod:`fairnas.benchmarks.surrogate`, fitted to
  the table ``dpn_paper_sampled``): simulated runs of any configuration, judged at the surrogate's means, its
  "maximum" hypervolume a reference (the best front a local search found, :mod:`fairnas.benchmarks.surrogate_front`;
  a share can exceed 1);
  ``surrogate_table``, the same built from ``dpn_showcase_noisy``, to check a surrogate's verdicts against the table
  it was fitted to.

None of them trains: each call is charged the epochs it would have trained (``RetrainingCost``). The live problem
that trains faces is ``bench/search_efficiency.py``'s ``faces``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
from fairnas.benchmarks.answer_quality import Truth
from fairnas.benchmarks.compute_meter import CostMeter, RetrainingCost
from fairnas.benchmarks.surrogate import RunsTable, Surrogate
from fairnas.benchmarks.surrogate_target import SurrogateTarget, SurrogateTruth
from fairnas.benchmarks.table_target import TableTarget
from fairnas.benchmarks.tables import TABLES, front_hypervolume, load_table, true_values
from fairnas.config import SPACES_DIR
from fairnas.search import SearchSpace, config_id, load_space
from fairnas.search.trial import Target


@dataclass(frozen=True)
class Problem:
    """A search problem: space, objectives, budgets, fixed reference point, and how to build its target."""

    name: str
    space: SearchSpace
    objectives: tuple[str, ...]
    min_budget: float
    max_budget: float
    eta: int
    reference_point: tuple[float, ...]
    default_total_budget: float
    make_target: Callable[[Path, bool, int], tuple[Target, CostMeter]]
    """``make_target(run_dir, continue_across_fidelities, seed)`` -> (target, meter of the epochs each call trains);
    ``seed`` is the search's seed (a table target draws its order of table seeds from it)."""
    max_hypervolume: float | None = None
    """The best hypervolume any search can reach (a table's own front, an analytic front), when known: results are
    also reported as a share of it."""
    truth: Truth | SurrogateTruth | None = None
    """A noisy table's true values (means over its training seeds) or a surrogate's (its predicted means), by which a
    search's answer is judged."""
    botorch: bool = False
    """One of BoTorch's test problems: the plain BoTorch loop (``reference_*``) runs on it."""


def analytic_problem() -> Problem:
    zdt1 = NoisyMultiFidelityProblem("zdt1", n_variables=4, noise=0.3)
    configspace = zdt1.configspace()
    return Problem(
        name="analytic",
        space=SearchSpace(configspace=configspace, keys={name: name for name in configspace}),
        objectives=zdt1.objectives,
        min_budget=1,
        max_budget=8,
        eta=2,
        reference_point=(1.1, 11.0),
        default_total_budget=400,
        make_target=lambda run_dir, continuing, seed: (zdt1, RetrainingCost(continuing)),
        max_hypervolume=1.1 * 11.0 - 1 / 3,  # the noise-free front f2 = 1 - sqrt(f1) inside (1.1, 11)
    )


def botorch_problem(name: str, fidelity_mapping: str = "linear_from_min", total_budget: float = 400) -> Problem:
    """BoTorch's ``MOMFBraninCurrin`` or ``MOMFPark`` (:mod:`fairnas.benchmarks.botorch_problems`) over budgets 1 to
    8 epochs, the budget mapped onto the fidelity input by ``fidelity_mapping``."""
    from fairnas.benchmarks.botorch_problems import MomfTarget  # BoTorch is in the bench extra only

    target = MomfTarget(name, min_budget=1, max_budget=8, fidelity_mapping=fidelity_mapping)
    configspace = target.configspace()
    return Problem(
        name=name if fidelity_mapping == "linear_from_min" else f"{name}_s8",
        space=SearchSpace(configspace=configspace, keys={name: name for name in configspace}),
        objectives=target.objectives,
        min_budget=target.min_budget,
        max_budget=target.max_budget,
        eta=2,
        reference_point=target.reference_point,
        default_total_budget=total_budget,
        make_target=lambda run_dir, continuing, seed: (target, RetrainingCost(continuing)),
        max_hypervolume=target.max_hypervolume,
        botorch=True,
    )


def table_problem(name: str = "dpn_showcase_noisy", tables: Path | None = None, readable: int | None = None) -> Problem:
    """The tabular benchmark ``<name>`` of the folder ``tables`` (default: the shipped ones,
    :mod:`fairnas.benchmarks.tables`): look-ups instead of training, so consumed epochs are charged as if trained
    (``RetrainingCost``). A search with seed s reads the table's training seeds in an order drawn from s
    (``Truth.seed_order``): its trials the first, each new training seed (the final stage's, SMAC's racing seeds)
    the next, each configuration the next of its own seeds, up to ``readable`` of them (default: half the seeds
    every configuration has); the rest judge its answer (``Truth.readable``). Reference point: :func:`_reference_point`.
    ``max_hypervolume`` is that of the front of the true values (means over all the table's seeds)."""
    table, spec = load_table(name, *([tables] if tables else []))
    objectives, max_budget = tuple(spec["objectives"]), spec["max_budget"]
    truth = Truth(table, objectives, max_budget, readable)

    def make_target(run_dir: Path, continuing: bool, seed: int) -> tuple[Target, CostMeter]:
        return TableTarget(table, objectives, seed_order=truth.seed_order(seed)), RetrainingCost(continuing)

    reference_point = _reference_point(table, spec)
    best = front_hypervolume(table, objectives, max_budget, reference_point)
    return _problem_over_table(f"table:{name}", spec, reference_point, make_target, best, truth)


SURROGATE_TABLE = "dpn_paper_sampled"
"""The table of the paper's whole space the ``surrogate`` problem is fitted to (docs/search_benchmark.md)."""
SURROGATE_FAMILY = "ensemble"
"""The surrogate's mean model, chosen by held-out validation (docs/search_benchmark.md, "Validation on held-out
configurations"): the average of a forest and gradient boosting, best or level with the best on every like-for-like
ranking there. On the paper-space table (337 configurations) it ranks held-out configurations at 0.80x (error) and
0.79x (rank disparity) of what a perfect model scores against their 2-seed means, 0.75x and 0.76x with whole
operation triples held out, and the best quarter by error at only 0.44x for error (0.72x for rank disparity)."""
SURROGATE_DESIGN = 4096
"""How many configurations of a space-filling design, beside the table's, a surrogate's reference front climbs
from."""


def surrogate_problem(name: str = SURROGATE_TABLE, tables: Path | None = None) -> Problem:
    """The surrogate benchmark fitted to the table ``<name>`` (:class:`~fairnas.benchmarks.surrogate.Surrogate`,
    :data:`SURROGATE_FAMILY`; seconds): a search with seed s draws its runs in world s
    (:class:`~fairnas.benchmarks.surrogate_target.SurrogateTarget`), so methods paired by seed see the same runs.
    Reference point as the table problem's. ``max_hypervolume`` is a reference, not a proven maximum: the
    hypervolume of the best front of the surrogate's means that
    :func:`~fairnas.benchmarks.surrogate_front.search_front` climbs to from the table's configurations and the points
    of a :data:`SURROGATE_DESIGN`-point Sobol design over the space (the table's own design is that sequence's first
    256). On ``dpn_paper_sampled`` the climb adds 7.8 % to the design's front, and climbs from other designs stop at
    0.96-0.98 of it; an answer's share of it can still exceed 1."""
    from fairnas.benchmarks.design import sobol_design  # scipy's quasi-random sequences; only needed here
    from fairnas.benchmarks.surrogate_front import search_front

    folder = tables or TABLES
    if not (folder / f"{name}.json").is_file():
        raise ValueError(
            f"the surrogate needs the table '{name}' in {folder}; build it with bench/tabular.py build "
            f"(docs/search_benchmark.md, 'The surrogate benchmark')"
        )
    table, spec = load_table(name, folder)
    objectives = tuple(spec["objectives"])
    space, runs, surrogate = table_surrogate(table, spec)

    def make_target(run_dir: Path, continuing: bool, seed: int) -> tuple[Target, CostMeter]:
        return SurrogateTarget(surrogate, objectives, world=seed), RetrainingCost(continuing)

    reference_point = _reference_point(table, spec)
    measured = runs.ids()
    design = [config for config in sobol_design(space, SURROGATE_DESIGN) if config_id(config) not in measured]
    columns = [surrogate.objectives.index(objective) for objective in objectives]
    reference_volume = search_front(
        lambda configs: surrogate.mean(configs)[:, -1][:, columns],
        space.configspace,
        [*runs.configs, *design],
        reference_point,
    )[0]
    truth = SurrogateTruth(surrogate, objectives)
    return _problem_over_table(f"surrogate:{name}", spec, reference_point, make_target, reference_volume, truth)


def table_surrogate(table: pd.DataFrame, spec: dict, split: str = "val") -> tuple[SearchSpace, RunsTable, Surrogate]:
    """The space of a table (its spec's), its runs on ``split`` and the surrogate (:data:`SURROGATE_FAMILY`) fitted
    to them."""
    space = load_space(SPACES_DIR.parent / spec["space"])
    runs = RunsTable.of(table, spec["objectives"], split)
    return space, runs, Surrogate.fit(space, runs, SURROGATE_FAMILY)


GOOD_SHARE = 0.25
"""The share of a table's configurations, lowest in true error, whose spread sets the reference point's scale."""
REFERENCE_MARGIN = 1.1
"""How far past the last of those configurations the reference point lies (per objective, in their spread)."""


def _reference_point(table: pd.DataFrame, spec: dict) -> tuple[float, ...]:
    """The hypervolume reference point, fixed from the table before any strategy runs: the box spans the range where
    searches end, each objective scaled by its own spread there, so neither objective's empty range dominates the
    score.

    With z the ideal point (each objective's lowest true value, means over seeds at the maximum budget) and s each
    objective's standard deviation over the :data:`GOOD_SHARE` of configurations lowest in true error (the region
    searches end in), the reference point is ``z + REFERENCE_MARGIN * w * s``, where ``w`` is the most spreads any of
    those configurations lies from ``z`` in any objective: the box holds every good configuration, and is as many
    spreads wide in each objective. On ``dpn_paper_sampled`` that is (0.566, 8.30): at a good model (error 0.47, rank
    disparity 2) one unit of rank disparity is worth 0.015 of error, where error 1 and 1.1 x the largest rank
    disparity (46.3) made it 0.012 but left 84 % of the box above every good model's rank disparity
    (docs/search_benchmark.md, "The score")."""
    objectives = list(spec["objectives"])
    means = true_values(table, objectives, spec["max_budget"])
    good = means[means[objectives[0]] <= means[objectives[0]].quantile(GOOD_SHARE)]
    ideal, spread = means.min(), good.std()
    widths = float(((good - ideal) / spread).max().max())
    return tuple(float(value) for value in ideal + REFERENCE_MARGIN * widths * spread)


def _problem_over_table(
    name: str,
    spec: dict,
    reference_point: tuple[float, ...],
    make_target: Callable[[Path, bool, int], tuple[Target, CostMeter]],
    max_hypervolume: float,
    truth: Truth | SurrogateTruth,
) -> Problem:
    """A problem over a table's space, objectives and budgets (1 to its epochs, eta 2, 30 full trials by default)."""
    return Problem(
        name=name,
        space=load_space(SPACES_DIR.parent / spec["space"]),
        objectives=tuple(spec["objectives"]),
        min_budget=1,
        max_budget=spec["max_budget"],
        eta=2,
        reference_point=reference_point,
        default_total_budget=30 * spec["max_budget"],
        make_target=make_target,
        max_hypervolume=max_hypervolume,
        truth=truth,
    )


PROBLEMS = {
    "analytic": analytic_problem,
    "momf_branin_currin": lambda: botorch_problem("momf_branin_currin"),
    "momf_park": lambda: botorch_problem("momf_park"),
    # the protocol for the GP comparison: fidelity s = budget / 8, 800 epochs
    "momf_branin_currin_s8": lambda: botorch_problem("momf_branin_currin", "share_of_max", 800),
    "momf_park_s8": lambda: botorch_problem("momf_park", "share_of_max", 800),
    "table": table_problem,
    "table6": lambda: table_problem("dpn_showcase_noisy6"),
    "paper_table": lambda: table_problem("dpn_paper_table", readable=3),
    "surrogate": surrogate_problem,
    "surrogate_table": lambda: surrogate_problem("dpn_showcase_noisy"),
}
