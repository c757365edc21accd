"""Search architectures and hyperparameters for the error-vs-fairness Pareto front: ``python search.py``."""

from fairnas.tasks.search import main

if __name__ == "__main__":
    main()
