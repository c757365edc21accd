"""The search benchmark as a library, in the style of YAHPO Gym and Syne Tune's blackbox repository: the blackbox, the
tables and their query, the surrogate, the problems and their targets, and the scoring of a search's answer. Nothing
here trains or imports a command, so a problem's target is a look-up or a formula and its cost a simulated count of
epochs. The project's own comparisons of the strategies on these problems (the methods, the runner, the plans, the
summaries and figures, the table builder) are not part of it: they live beside the scripts that run them, in the
repository's ``bench/comparison/`` (docs/search_benchmark.md).

- :mod:`~fairnas.benchmarks.blackbox`: the surrogate benchmark, or a table's own runs, as a blackbox for anyone's
  optimiser (docs/blackbox.md); :mod:`~fairnas.benchmarks.syne_tune_blackbox`, its adapter to Syne Tune's simulator.
- :mod:`~fairnas.benchmarks.tables`: the shipped tabular benchmarks and their query API;
  :mod:`~fairnas.benchmarks.table_target`, a search target of noisy look-ups; :mod:`~fairnas.benchmarks.design`,
  which configurations a table holds (every one of a discrete space, or a space-filling design of a large one).
- :mod:`~fairnas.benchmarks.surrogate`: a surrogate fitted to a table (predicted means and seed noise of any
  configuration of its space, the seed effect shared by a seed's runs, each configuration's seconds), how it is
  validated on held-out configurations; :mod:`~fairnas.benchmarks.surrogate_metrics`, what it models of a table and
  how the objectives follow from it, with their exact expectations; its search target and truth,
  :mod:`~fairnas.benchmarks.surrogate_target`; :mod:`~fairnas.benchmarks.surrogate_front`, the reference front its
  search problem scores against.
- :mod:`~fairnas.benchmarks.problems`: the problems by name, each with its target and cost meter
  (:mod:`~fairnas.benchmarks.compute_meter`: consumed epochs per call, and the stop at a consumed budget);
  :mod:`~fairnas.benchmarks.analytic`, noisy multi-fidelity ZDT1 / DTLZ2 targets;
  :mod:`~fairnas.benchmarks.botorch_problems`, BoTorch's multi-fidelity test problems (needs the ``botorch`` extra;
  imported only when used).
- :mod:`~fairnas.benchmarks.answer_quality`: the true quality of a search's answer.
"""
