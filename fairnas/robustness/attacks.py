"""Upper bounds on the L2 distance to the decision boundary from minimal adversarial examples (thesis Sec. 2.4.1).

Any adversarial example x' of a correctly classified x gives d(x) <= ||x - x'||_2. DeepFool (Moosavi-Dezfooli et
al., CVPR 2016) and Carlini-Wagner L2 (S&P 2017) both search for the smallest such x' inside the pixel box [0, 1];
they run through Foolbox 3 (Rauber et al., JOSS 2020), chosen over torchattacks and ART because its DeepFool
differentiates only each sample's top-``candidates`` classes in one batched pass (the others build a Jacobian
over all classes, or over the union of every sample's candidates: prohibitive with thousands of identities) and
its C&W runs the original binary search over the constant c natively in PyTorch (torchattacks fixes c).

Conventions of eqs. 2.4-2.5: a misclassified input has distance 0; an input the attack could not flip within its
budget has distance +inf (no bound found).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import torch
from torch import nn

from fairnas.validation import Settings

if TYPE_CHECKING:
    import foolbox

PIXEL_BOUNDS = (0.0, 1.0)


def _foolbox():
    """Foolbox, imported when an attack is built: training imports this package, and GPU images often lack it."""
    return importlib.import_module("foolbox")


class MinimalAdversarialDistance:
    """Distance of each input to the minimal adversarial example a Foolbox minimisation attack finds."""

    bound = "upper"

    def __init__(self, attack: foolbox.attacks.base.MinimizationAttack) -> None:
        self.attack = attack

    def __call__(self, classifier: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        model = _foolbox().PyTorchModel(classifier, bounds=PIXEL_BOUNDS, device=inputs.device)
        labels = labels.to(inputs.device).long()
        with torch.enable_grad():
            _, adversarial, success = self.attack(model, inputs.detach(), labels, epsilons=None)
            with torch.no_grad():
                correct = classifier(inputs).argmax(dim=1) == labels
        distance = (adversarial - inputs).flatten(1).norm(dim=1)
        distance = torch.where(success, distance, torch.full_like(distance, float("inf")))
        return torch.where(correct, distance, torch.zeros_like(distance)).detach()


class DeepFool(MinimalAdversarialDistance):
    """L2 DeepFool: iterated linearised steps towards the nearest of the top ``candidates`` classes."""

    def __init__(self, steps: int = 50, candidates: int = 10, overshoot: float = 0.02) -> None:
        _check_positive_int("deepfool", steps=steps, candidates=candidates)
        if candidates < 2:
            raise ValueError(f"deepfool.candidates={candidates} must be >= 2 (the true class and a rival)")
        if overshoot < 0:
            raise ValueError(f"deepfool.overshoot={overshoot} must be non-negative")
        super().__init__(_foolbox().attacks.L2DeepFoolAttack(steps=steps, candidates=candidates, overshoot=overshoot))


class CarliniWagnerL2(MinimalAdversarialDistance):
    """Carlini-Wagner L2 with binary search over the trade-off constant c (tanh box parametrisation, Adam)."""

    def __init__(
        self,
        binary_search_steps: int = 9,
        steps: int = 1000,
        stepsize: float = 0.01,
        initial_const: float = 0.001,
        abort_early: bool = True,
    ) -> None:
        _check_positive_int("cw", binary_search_steps=binary_search_steps, steps=steps)
        if stepsize <= 0 or initial_const <= 0:
            raise ValueError(f"cw.stepsize={stepsize} and cw.initial_const={initial_const} must be positive")
        super().__init__(
            _foolbox().attacks.L2CarliniWagnerAttack(
                binary_search_steps=binary_search_steps,
                steps=steps,
                stepsize=stepsize,
                initial_const=initial_const,
                abort_early=abort_early,
            )
        )


def _check_positive_int(method: str, **values: int) -> None:
    for name, value in values.items():
        Settings(f"{method}.").integer(name, value, minimum=1)
