"""The one way to check a setting: :class:`Settings` checks the values under one key prefix (``search.``,
``study.noise.``, ``corruptions.``, ...), and every failure is a :class:`SettingError` whose message is one line,
``<prefix><name>=<value> must be <what is allowed>``.

An integer here is an integral number that is not a bool (YAML's ``true`` is no count), a number a real one that is
not a bool; :func:`is_integer` and :func:`is_number` say so where a value is only sorted, not checked.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Collection, Iterable
from typing import Any, NoReturn, TypeGuard


class SettingError(ValueError):
    """A bad setting, in one line naming its full ``key``, the bad ``value`` and what is ``allowed``."""

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        super().__init__(f"{key}={value!r} must be {allowed}")
        self.key, self.value, self.allowed = key, value, allowed


def is_integer(value: Any) -> TypeGuard[int]:
    """An integral number (Python's or numpy's), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[float]:
    """A real number (an integer included), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Checks of the settings named ``<prefix><name>``. Each returns the value, converted (an int, a float, a
    tuple), or raises a :class:`SettingError`; with ``null=<what null means>`` a None passes too and the message
    says ``or null (<what null means>)``."""

    prefix: str = ""

    def fail(self, name: str, value: Any, allowed: str) -> NoReturn:
        """Raise the one-line :class:`SettingError` of ``<prefix><name>``."""
        raise SettingError(f"{self.prefix}{name}", value, allowed)

    def integer(
        self,
        name: str,
        value: Any,
        minimum: int | None = None,
        maximum: int | None = None,
        *,
        null: str | None = None,
        integral_floats: bool = False,
    ) -> Any:
        """An integer in ``[minimum, maximum]`` (``minimum=1``: a positive integer); with ``integral_floats`` a
        float such as 2.0 counts as the integer 2."""
        if value is None and null is not None:
            return None
        whole = is_integer(value) or (integral_floats and is_number(value) and math.isfinite(value) and value % 1 == 0)
        if not whole or not _within(value, minimum, maximum):
            self.fail(name, value, _or_null(_integers(minimum, maximum), null))
        return int(value)

    def number(
        self,
        name: str,
        value: Any,
        minimum: float | None = None,
        maximum: float | None = None,
        *,
        null: str | None = None,
    ) -> Any:
        """A number in ``[minimum, maximum]`` (either bound optional; a bounded number is never NaN)."""
        if value is None and null is not None:
            return None
        if not is_number(value) or not _within(value, minimum, maximum):
            self.fail(name, value, _or_null(_numbers(minimum, maximum), null))
        return float(value)

    def positive(self, name: str, value: Any, unit: str = "") -> float:
        """A number > 0 (``unit``, e.g. ``(GiB)``, is named after it)."""
        if not is_number(value) or not value > 0:
            self.fail(name, value, f"a positive number{f' {unit}' if unit else ''}")
        return float(value)

    def between(self, name: str, value: Any, low: float, high: float) -> float:
        """A number strictly between ``low`` and ``high``."""
        if not is_number(value) or not low < value < high:
            self.fail(name, value, f"a number in ({low:g}, {high:g})")
        return float(value)

    def probability(self, name: str, value: Any) -> float:
        """A number strictly between 0 and 1 (a significance level, a power, a fraction)."""
        return self.between(name, value, 0, 1)

    def boolean(self, name: str, value: Any) -> bool:
        """True or false (a bool, not a truthy value)."""
        if not isinstance(value, bool):
            self.fail(name, value, "true or false")
        return value

    def choice(self, name: str, value: Any, allowed: Collection[Any]) -> Any:
        """One of ``allowed``."""
        if value not in allowed:
            self.fail(name, value, f"one of {list(allowed)}")
        return value

    def sequence(self, name: str, value: Any, expected: str = "a list") -> tuple[Any, ...]:
        """A list (any iterable but a string), as a tuple; ``expected`` says what it must hold."""
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            self.fail(name, value, expected)
        return tuple(value)


def optional(check: Callable[..., Any], name: str, value: Any, **bounds: Any) -> Any:
    """None for None, else ``check(name, value, **bounds)``."""
    return None if value is None else check(name, value, **bounds)


def _within(value: Any, minimum: float | None, maximum: float | None) -> bool:
    return (minimum is None or value >= minimum) and (maximum is None or value <= maximum)


def _integers(minimum: int | None, maximum: int | None) -> str:
    if maximum is not None:
        return f"an integer in {minimum if minimum is not None else '-inf'}..{maximum}"
    return {None: "an integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")


def _numbers(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"a number in [{minimum:g}, {maximum:g}]"
    if minimum is not None:
        return f"a number >= {minimum:g}"
    return "a number" if maximum is None else f"a number <= {maximum:g}"


def _or_null(allowed: str, null: str | None) -> str:
    return allowed if null is None else f"{allowed} or null ({null})"
