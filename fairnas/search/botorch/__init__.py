"""``search.strategy=botorch``: a Gaussian-process search with BoTorch (multi-objective, noisy, multi-fidelity).

- :mod:`~fairnas.search.botorch.encoding`: configurations as model inputs (conditions, imputation) and back;
- :mod:`~fairnas.search.botorch.model`: the Gaussian process, qLogNEHVI and MOMF, the acquisition optimiser;
- :mod:`~fairnas.search.botorch.strategy`: ``BotorchStrategy``, the ask/tell strategy and its fidelity variants.

BoTorch is an optional extra (``pip install -e '.[botorch]'``); without it, importing this package stops with one
line naming the extra.
"""

from fairnas.search.botorch.strategy import BotorchStrategy

__all__ = ["BotorchStrategy"]
