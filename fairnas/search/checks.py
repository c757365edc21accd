"""The value checks behind every search setting: one-line ValueErrors naming the ``search.<key>``."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, ClassVar, Self


class Section:
    """A settings section ``search.<section>`` (a frozen dataclass): :meth:`from_mapping` takes its values over
    the defaults and :meth:`checked` (each subclass's) checks them, a bad one named in one line."""

    section: ClassVar[str]

    @classmethod
    def from_mapping(cls, mapping: Any) -> Self:
        """The section from a dict, an OmegaConf node, None (the defaults) or itself; an unknown key is named."""
        if isinstance(mapping, cls):
            return mapping
        return cls.checked(section_values(cls, mapping, cls.section))

    @classmethod
    def checked(cls, values: dict[str, Any]) -> Self:
        """The section from every one of its values, each checked."""
        raise NotImplementedError


def section_values(cls: type, mapping: Mapping[str, Any] | None, section: str) -> dict[str, Any]:
    """A settings section (``search.<section>``) over its dataclass's defaults; an unknown key is named."""
    mapping = dict(mapping or {})
    allowed = [field.name for field in dataclasses.fields(cls)]
    unknown = [str(key) for key in mapping if key not in allowed]
    if unknown:
        raise ValueError(f"unknown search.{section} settings {unknown}; allowed: {allowed}")
    return {field.name: field.default for field in dataclasses.fields(cls)} | mapping


def check_choice(name: str, value: Any, allowed: Collection[str]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown search.{name} {value!r}; allowed: {list(allowed)}")


def as_tuple(name: str, value: Any, expected: str = "a list") -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"search.{name} must be {expected}, got {value!r}")
    return tuple(value)


def optional(convert: Callable[..., Any], name: str, value: Any, **bounds: int) -> Any:
    return None if value is None else convert(name, value, **bounds)


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def number(name: str, value: Any) -> float:
    if not is_number(value):
        raise ValueError(f"search.{name} must be a number, got {value!r}")
    return float(value)


def number_list(name: str, values: Any, expected: str = "a list of numbers") -> tuple[float, ...]:
    return tuple(number(name, value) for value in as_tuple(name, values, expected))


def number_or_numbers(name: str, value: Any) -> float | tuple[float, ...]:
    return float(value) if is_number(value) else number_list(name, value, "a number or a list of numbers")


def integer(name: str, value: Any, minimum: int | None = None) -> int:
    bound = "" if minimum is None else f" >= {minimum}"
    is_integer = is_number(value) and math.isfinite(value) and int(value) == value
    if not is_integer or (minimum is not None and value < minimum):
        raise ValueError(f"search.{name} must be an integer{bound}, got {value!r}")
    return int(value)
