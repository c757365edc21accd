"""The commands: the only modules that wire a command's config to the library and import across its packages.

Each command is a function of its composed Hydra config and a console entry point (``main``):

- :mod:`fairnas.tasks.train`: trains and evaluates one model (``train.py``, ``fairnas-train``);
- :mod:`fairnas.tasks.search`: the architecture and hyperparameter search (``search.py``, ``fairnas-search``);
- :mod:`fairnas.tasks.evaluate`: transfer evaluation on benchmarks (``evaluate.py``, ``fairnas-evaluate``);
- :mod:`fairnas.tasks.audit`: the robustness-bias audit (``audit.py``, ``fairnas-audit``);
- :mod:`fairnas.tasks.compare`: the bias-mitigation comparison (``compare.py``, ``fairnas-compare``);
- :mod:`fairnas.tasks.study`: the Chapter 4 study, every stage (``study.py``, ``fairnas-study``).

Shared by them: :mod:`fairnas.tasks.cli` (entry points, one-line errors). What they run is library code: one
training run (:mod:`fairnas.training.run`, :mod:`fairnas.training.build`: ``build_model``, ``load_run``), runs
through the search's pool (:mod:`fairnas.training.run_pool`), the training settings checks
(:mod:`fairnas.training.settings`), the lock on a run folder (:mod:`fairnas.run_lock`) and the loggers, tables and
figures (:mod:`fairnas.reporting`). Nothing in the library packages imports from here.
"""
