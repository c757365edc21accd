"""fairnas: neural architecture and hyperparameter search for fairer face recognition."""

__version__ = "0.1.0"
