"""Thesis Chapter 4 as one command: ``python study.py [experiment=showcase] [study=smoke] [overrides]``."""

from fairnas.tasks.study import main

if __name__ == "__main__":
    main()
