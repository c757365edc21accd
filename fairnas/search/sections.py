"""The search's settings sections (``search.<section>``, :class:`Section`) and the checks of their values:
those of :mod:`fairnas.validation` under the ``search.`` prefix, so each failure is one line naming the
``search.<key>``. Integers may be given as integral floats (2.0)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from fairnas.validation import Settings, is_number, optional

__all__ = [
    "SEARCH",
    "Section",
    "as_tuple",
    "check_choice",
    "integer",
    "is_number",
    "number",
    "number_list",
    "number_or_numbers",
    "optional",
    "section_values",
]

SEARCH = Settings("search.")
integer = functools.partial(SEARCH.integer, integral_floats=True)
number = SEARCH.number
check_choice = SEARCH.choice
as_tuple = SEARCH.sequence


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


def number_list(name: str, values: Any, expected: str = "a list of numbers") -> tuple[float, ...]:
    """``search.<name>``: a list of numbers, as a tuple of floats."""
    return tuple(number(name, value) for value in as_tuple(name, values, expected))


def number_or_numbers(name: str, value: Any) -> float | tuple[float, ...]:
    """``search.<name>``: one number, or a list of them."""
    return float(value) if is_number(value) else number_list(name, value, "a number or a list of numbers")
