"""Search spaces as data: YAML space files -> ConfigSpace spaces and Hydra overrides.

A space file lists hyperparameters, each naming the training-config key it sets, plus optional
conditions. This is how the paper's space (thesis Sec. 4.4.2-4.4.3: three DPN op slots, head,
optimizer, optimizer-conditional learning rate) and the timm case study (Sec. 4.3) are stored.

Schema::

    name: dpn_paper                       # optional
    description: ...                      # optional
    hyperparameters:
      op0: {type: categorical, choices: [0, 1, 2], key: backbone.ops.0}
      head: {type: categorical, choices: [cosface, arcface], key: head}
      width: {type: ordinal, sequence: [16, 32, 64], key: backbone.width}
      depth: {type: integer, lower: 1, upper: 8, log: false, key: backbone.depth}
      backbone: {type: constant, value: timm, key: backbone}
      lr_adam: {type: float, lower: 1.0e-4, upper: 1.0e-2, log: true, key: optimizer.lr}
    conditions:                           # optional; several on one child are AND-ed
      - {child: lr_adam, parent: optimizer, in: [adam, adamw]}
      - {child: lr_sgd, parent: optimizer, equals: sgd}

Keys ending in ``.<index>`` (``backbone.ops.0``) are list items: all items of one list are
combined into a single override (``backbone.ops=[3,0,1]``). Several hyperparameters may set the
same key when conditions keep at most one of them active (``lr_adam`` and ``lr_sgd`` both set
``optimizer.lr``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ConfigSpace import (
    AndConjunction,
    Categorical,
    ConfigurationSpace,
    Constant,
    EqualsCondition,
    Float,
    InCondition,
    Integer,
    OrdinalHyperparameter,
)

_INDEXED_KEY = re.compile(r"^(?P<base>.+)\.(?P<index>\d+)$")
_BARE_STRING = re.compile(r"^[A-Za-z_][\w\-/]*$")
_HYDRA_RESERVED_WORDS = {"true", "false", "null", "inf", "nan"}

_TOP_LEVEL_FIELDS = {"name", "description", "hyperparameters", "conditions"}
_HYPERPARAMETER_FIELDS = {
    "constant": ({"type", "key", "value"}, set()),
    "categorical": ({"type", "key", "choices"}, {"default"}),
    "ordinal": ({"type", "key", "sequence"}, {"default"}),
    "integer": ({"type", "key", "lower", "upper"}, {"log", "default"}),
    "float": ({"type", "key", "lower", "upper"}, {"log", "default"}),
}
_CONDITION_FIELDS = {"child", "parent", "equals", "in"}

KeyValidator = Collection[str] | Callable[[str], bool]


@dataclass(frozen=True)
class SearchSpace:
    """A ConfigSpace space plus the training-config key each hyperparameter sets."""

    configspace: ConfigurationSpace
    keys: Mapping[str, str]
    name: str = ""

    def overrides(self, config: Mapping[str, Any]) -> list[str]:
        """Hydra override strings that apply ``config`` to the training config."""
        return config_to_overrides(config, self.keys)


def load_space(
    source: str | Path | Mapping[str, Any],
    *,
    known_keys: KeyValidator | None = None,
    seed: int | None = None,
) -> SearchSpace:
    """Build a :class:`SearchSpace` from a space file path or an already-parsed mapping.

    ``known_keys`` (a collection of dotted keys, or a predicate) checks every key a hyperparameter
    sets against the training config; list-item keys are checked by their list key.
    """
    if isinstance(source, Mapping):
        spec, origin = dict(source), "space dict"
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"space file '{path}' does not exist")
        try:
            spec, origin = yaml.safe_load(path.read_text()), str(path)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ValueError(
                f"space file '{path}' is not valid YAML{where}: {getattr(error, 'problem', None) or error}"
            ) from None
        if not isinstance(spec, Mapping):
            raise ValueError(f"space file '{path}' must hold a mapping with 'hyperparameters'")
        spec.setdefault("name", path.stem)
    _check_fields(set(spec), required={"hyperparameters"}, allowed=_TOP_LEVEL_FIELDS, where=origin)

    hyperparameters = spec["hyperparameters"]
    if not isinstance(hyperparameters, Mapping) or not hyperparameters:
        raise ValueError(f"{origin}: 'hyperparameters' must be a non-empty mapping of name -> spec")

    configspace = ConfigurationSpace(name=str(spec.get("name", "")), seed=seed)
    keys: dict[str, str] = {}
    for name, hp_spec in hyperparameters.items():
        configspace.add(_build_hyperparameter(str(name), hp_spec))
        keys[str(name)] = str(hp_spec["key"])
    _check_list_keys(keys)
    if known_keys is not None:
        check_known_keys(keys, known_keys)

    for condition in _build_conditions(spec.get("conditions") or [], configspace):
        configspace.add(condition)
    return SearchSpace(configspace=configspace, keys=keys, name=str(spec.get("name", "")))


def config_to_overrides(config: Mapping[str, Any], mapping: Mapping[str, str]) -> list[str]:
    """Turn an (active-only) configuration into Hydra override strings, e.g. ``head=arcface``.

    Hyperparameters mapped to list items (``backbone.ops.0`` ...) become one list override.
    """
    unmapped = sorted(set(config) - set(mapping))
    if unmapped:
        raise ValueError(f"hyperparameters {unmapped} have no config key; known: {sorted(mapping)}")
    scalar_values: dict[str, tuple[str, Any]] = {}
    list_items: dict[str, dict[int, Any]] = {}
    for name, key in mapping.items():  # space-file order
        if name not in config:
            continue
        value = config[name]
        if key in scalar_values:
            raise ValueError(
                f"hyperparameters '{scalar_values[key][0]}' and '{name}' are both active and both set "
                f"'{key}'; add conditions so at most one is active"
            )
        scalar_values[key] = (name, value)
        indexed = _INDEXED_KEY.match(key)
        if indexed:
            list_items.setdefault(indexed["base"], {})[int(indexed["index"])] = value

    overrides = []
    emitted_lists = set()
    for key, (_, value) in scalar_values.items():
        indexed = _INDEXED_KEY.match(key)
        if not indexed:
            overrides.append(f"{key}={_format_value(value)}")
            continue
        base = indexed["base"]
        if base in emitted_lists:
            continue
        emitted_lists.add(base)
        overrides.append(f"{base}={_format_list(base, list_items[base], mapping)}")
    return overrides


def _build_hyperparameter(name: str, spec: Any):
    if not isinstance(spec, Mapping):
        raise ValueError(f"hyperparameter '{name}' must be a mapping with 'type' and 'key'")
    hp_type = spec.get("type")
    if hp_type not in _HYPERPARAMETER_FIELDS:
        raise ValueError(f"hyperparameter '{name}' has type {hp_type!r}; allowed: {sorted(_HYPERPARAMETER_FIELDS)}")
    required, optional = _HYPERPARAMETER_FIELDS[hp_type]
    _check_fields(set(spec), required=required, allowed=required | optional, where=f"hyperparameter '{name}'")
    default = {"default": spec["default"]} if "default" in spec else {}
    if hp_type == "constant":
        return Constant(name, spec["value"])
    if hp_type == "categorical":
        return Categorical(name, list(spec["choices"]), **default)
    if hp_type == "ordinal":
        return OrdinalHyperparameter(name, list(spec["sequence"]), **{f"{k}_value": v for k, v in default.items()})
    log = bool(spec.get("log", False))
    if hp_type == "integer":
        return Integer(name, (int(spec["lower"]), int(spec["upper"])), log=log, **default)
    return Float(name, (float(spec["lower"]), float(spec["upper"])), log=log, **default)


def _build_conditions(specs: Any, configspace: ConfigurationSpace) -> list:
    if not isinstance(specs, list):
        raise ValueError("'conditions' must be a list of {child, parent, equals|in} mappings")
    by_child: dict[str, list] = {}
    for spec in specs:
        where = f"condition {spec!r}"
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where} must be a mapping with child, parent and equals or in")
        _check_fields(set(spec), required={"child", "parent"}, allowed=_CONDITION_FIELDS, where=where)
        if ("equals" in spec) == ("in" in spec):
            raise ValueError(f"{where} needs exactly one of 'equals' or 'in'")
        for role in ("child", "parent"):
            if spec[role] not in configspace:
                raise ValueError(f"{where}: {role} '{spec[role]}' is not a hyperparameter of the space")
        child, parent = configspace[spec["child"]], configspace[spec["parent"]]
        condition: EqualsCondition | InCondition
        if "equals" in spec:
            condition = EqualsCondition(child, parent, spec["equals"])
        else:
            condition = InCondition(child, parent, list(spec["in"]))
        by_child.setdefault(child.name, []).append(condition)
    return [conds[0] if len(conds) == 1 else AndConjunction(*conds) for conds in by_child.values()]


def _check_fields(present: set, *, required: set, allowed: set, where: str) -> None:
    missing = required - present
    if missing:
        raise ValueError(f"{where} is missing {sorted(missing)}")
    unknown = present - allowed
    if unknown:
        raise ValueError(f"{where} has unknown fields {sorted(unknown)}; allowed: {sorted(allowed)}")


def _check_list_keys(keys: Mapping[str, str]) -> None:
    indices: dict[str, list[int]] = {}
    for key in keys.values():
        indexed = _INDEXED_KEY.match(key)
        if indexed:
            indices.setdefault(indexed["base"], []).append(int(indexed["index"]))
    for base, found in indices.items():
        if base in keys.values():
            raise ValueError(f"key '{base}' is set both as a whole and by item ('{base}.<i>')")
        if sorted(set(found)) != list(range(len(set(found)))):
            raise ValueError(f"list key '{base}' must use indices 0..n-1 without gaps; got {sorted(set(found))}")


def check_known_keys(keys: Mapping[str, str], known_keys: KeyValidator) -> None:
    """Raise ValueError for the first hyperparameter whose key ``known_keys`` does not accept."""
    is_known = known_keys if callable(known_keys) else set(known_keys).__contains__
    for name, key in keys.items():
        indexed = _INDEXED_KEY.match(key)
        checked = indexed["base"] if indexed else key
        if not is_known(checked):
            raise ValueError(f"space key '{checked}' (hyperparameter '{name}') is not a key of the training config")


def _format_list(base: str, items: Mapping[int, Any], mapping: Mapping[str, str]) -> str:
    expected = sorted(
        int(m["index"]) for key in mapping.values() if (m := _INDEXED_KEY.match(key)) and m["base"] == base
    )
    missing = sorted(set(expected) - set(items))
    if missing:
        raise ValueError(f"list key '{base}' needs every item active; items {missing} are missing from the config")
    return "[" + ",".join(_format_value(items[i]) for i in expected) + "]"


def _format_value(value: Any) -> str:
    """Format one value in Hydra's override grammar (quote strings that would parse as other types)."""
    if hasattr(value, "item"):  # numpy scalar -> Python scalar
        value = value.item()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if _BARE_STRING.match(text) and text.lower() not in _HYDRA_RESERVED_WORDS:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
