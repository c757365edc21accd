"""The commands: the only modules that wire a config to objects and import across the library packages.

Each command is a function of its composed Hydra config and a console entry point (``main``):

- :mod:`fairnas.tasks.train`: ``train(cfg)`` trains and evaluates one model (``train.py``, ``fairnas-train``);
- :mod:`fairnas.tasks.search`: the architecture and hyperparameter search (``search.py``, ``fairnas-search``);
- :mod:`fairnas.tasks.evaluate`: transfer evaluation on benchmarks (``evaluate.py``, ``fairnas-evaluate``);
- :mod:`fairnas.tasks.audit`: the robustness-bias audit (``audit.py``, ``fairnas-audit``);
- :mod:`fairnas.tasks.compare`: the bias-mitigation comparison (``compare.py``, ``fairnas-compare``).

Shared by them: :mod:`fairnas.tasks.runs` (config -> model and data; ``read_checkpoint``, the one checkpoint
reader, and ``load_run``), :mod:`fairnas.tasks.reporting` (loggers, device, tables and figures) and
:mod:`fairnas.tasks.cli` (entry points, one-line errors). Nothing in the library packages imports from here.
"""
