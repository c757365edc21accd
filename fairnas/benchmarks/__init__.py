"""Benchmarks of the search: problems, methods, the compute meter and the scoring of answers, as a library.

The measuring scripts in ``bench/`` (speed, cost, search efficiency) import it; nothing here trains or imports a
command, so a problem's target is a look-up or a formula and its cost a simulated count of epochs.

- :mod:`~fairnas.benchmarks.analytic`: noisy multi-fidelity ZDT1 / DTLZ2 targets.
- :mod:`~fairnas.benchmarks.botorch_problems`: BoTorch's multi-fidelity test problems (needs the ``botorch`` extra;
  imported only when used), and :mod:`~fairnas.benchmarks.botorch_reference`, BoTorch's own loop on them.
- :mod:`~fairnas.benchmarks.tables`: the shipped tabular benchmarks and their query API;
  :mod:`~fairnas.benchmarks.table_target`, a search target of noisy look-ups; :mod:`~fairnas.benchmarks.tabular`,
  how a table is built; :mod:`~fairnas.benchmarks.table_report`, what it holds.
- :mod:`~fairnas.benchmarks.surrogate`: a surrogate fitted to a table (predicted means and seed noise of any
  configuration of its space, the seed effect shared by a seed's runs, each configuration's seconds), how it is
  validated on held-out configurations; :mod:`~fairnas.benchmarks.surrogate_metrics`, what it models of a table and
  how the objectives follow from it, with their exact expectations; its search target and truth,
  :mod:`~fairnas.benchmarks.surrogate_target`; :mod:`~fairnas.benchmarks.surrogate_front`, the reference front its
  search problem scores against; :mod:`~fairnas.benchmarks.design`, the space-filling design a table of a large
  space trains.
- :mod:`~fairnas.benchmarks.blackbox`: the surrogate benchmark, or a table's own runs, as a blackbox for anyone's
  optimiser (docs/blackbox.md); :mod:`~fairnas.benchmarks.syne_tune_blackbox`, its adapter to Syne Tune's simulator.
- :mod:`~fairnas.benchmarks.compute_meter`: consumed epochs per call, and the stop at a consumed budget.
- :mod:`~fairnas.benchmarks.problems` and :mod:`~fairnas.benchmarks.methods`: the registries by name.
- :mod:`~fairnas.benchmarks.runner`: a method on a problem until a consumed budget.
- :mod:`~fairnas.benchmarks.summary`, :mod:`~fairnas.benchmarks.answer_quality`, :mod:`~fairnas.benchmarks.figure`:
  hypervolume at the budget, the answers' true quality, the efficiency figure.
- :mod:`~fairnas.benchmarks.cli`: what the scripts' command lines share.
"""
