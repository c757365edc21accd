"""A study (thesis Chapter 4 as one command, ``python study.py``): its stages, one module each with their registry
(:mod:`fairnas.study.stages`), the check of its settings (:mod:`fairnas.study.checks`), the state every stage uses
(:mod:`fairnas.study.context`), its runs as data (:mod:`fairnas.study.runs`), the claims it decides from them
(:mod:`fairnas.study.claims`) and its report (:mod:`fairnas.study.summary`, :mod:`fairnas.study.report`). The command
that wires the stages to training and the search is :mod:`fairnas.tasks.study`."""
