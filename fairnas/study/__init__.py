"""A study (thesis Chapter 4 as one command, ``python study.py``): the claims it decides from its runs
(:mod:`fairnas.study.claims`) and its report (:mod:`fairnas.study.report`). The command that trains the runs is
:mod:`fairnas.tasks.study`."""
