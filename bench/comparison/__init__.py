"""The project's comparisons of the search strategies on the benchmark problems of :mod:`fairnas.benchmarks`: what
``bench/search_efficiency.py``, ``bench/search_plan.py``, ``bench/tabular.py`` and the other search scripts run and
the tests check. It imports the library; the ``fairnas`` library never imports it.

- :mod:`~bench.comparison.methods`: the methods by name (every registered strategy, with and without the final
  stage, and the variants); :mod:`~bench.comparison.runner`, a method on a problem until a consumed budget;
  :mod:`~bench.comparison.reference_loop`, BoTorch's own loop on its problems, outside fairnas.
- :mod:`~bench.comparison.method_summary`, :mod:`~bench.comparison.figure`: hypervolume at the budget, the
  answers' true quality, the efficiency figure; :mod:`~bench.comparison.answer_estimates`, a run's answer chosen by a
  model's estimate.
- :mod:`~bench.comparison.plan`: a comparison sized from a pilot before it runs, and its verdicts.
- :mod:`~bench.comparison.table_builder`: how a table is built (trained through the ``train`` it is given);
  :mod:`~bench.comparison.table_report`, what a table holds; :mod:`~bench.comparison.live_check`, a surrogate read
  against live studies.
- :mod:`~bench.comparison.command_line`: what the scripts' command lines share.
"""
