"""Building a policy's own settings type straight from a YAML mapping.

Each policy owns a frozen, keyword-only settings dataclass whose fields carry their one default
and whose ``__post_init__`` checks each value, raising
:class:`slackwise_policies.settings_error.SettingsError` with the key. :func:`settings_from`
reads a section into such a type by the field annotations alone: an unknown key is named with
the known ones, a value of the wrong kind (a string for a number, ``yes`` quoted, a list) is
named with its key, and what the type itself refuses comes back with the file and the section
in front (``slackwise.yaml: adapter.aimd.mult: must be within (0, 1), got 1.5``). No table of
names stands between the YAML and the type."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from slackwise_config.reader import Reader
from slackwise_policies.settings_error import SettingsError

__all__ = ["check_value", "named", "overrides_from", "read_fields", "settings_from"]

T = TypeVar("T")


def _kinds(hint: Any) -> tuple[Any, ...]:
    """The alternatives a field's annotation allows (``float | None`` is two)."""
    if get_origin(hint) in (Union, types.UnionType):
        return get_args(hint)
    return (hint,)


def _fits(kind: Any, value: Any) -> bool:
    if kind is type(None):
        return value is None
    if get_origin(kind) is Literal:
        return any(value == choice and type(value) is type(choice) for choice in get_args(kind))
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str) and bool(value)
    raise TypeError(f"settings_from cannot read a field of type {kind!r}")


def _describe(kind: Any) -> str:
    if kind is type(None):
        return "null"
    if get_origin(kind) is Literal:
        return " | ".join(str(choice) for choice in get_args(kind))
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[kind]


def check_value(r: Reader, hint: Any, value: Any, where: str) -> Any:
    """``value`` if it is of a kind ``hint`` allows (a whole number where a float is wanted
    comes back a float), else a :class:`ConfigError` naming ``where`` and the value."""
    kinds = _kinds(hint)
    for kind in kinds:
        if _fits(kind, value):
            return float(value) if kind is float and isinstance(value, int) else value
    if all(get_origin(kind) is Literal for kind in kinds):
        wanted = f"one of {', '.join(str(c) for kind in kinds for c in get_args(kind))}"
    else:
        wanted = " or ".join(_describe(kind) for kind in kinds)
    raise r.fail(where, f"must be {wanted}, got {value!r}")


def read_fields(r: Reader, cls: type[Any], raw: Any, path: str) -> dict[str, Any]:
    """The keys of the mapping ``raw`` at ``path``, each a field of the dataclass ``cls`` and
    of a kind its annotation allows."""
    data = r.mapping(raw, path)
    hints = get_type_hints(cls)
    r.only(data, path, {f.name for f in dataclasses.fields(cls)})
    return {key: check_value(r, hints[key], value, f"{path}.{key}") for key, value in data.items()}


@contextmanager
def named(r: Reader, path: str) -> Iterator[None]:
    """A :class:`SettingsError` raised inside comes out a :class:`ConfigError` at
    ``path.key``."""
    try:
        yield
    except SettingsError as exc:
        raise r.fail(f"{path}.{exc.key}", exc.reason) from None


def settings_from(r: Reader, cls: type[T], raw: Any, path: str, **given: Any) -> T:
    """The policy settings ``cls`` from the mapping ``raw`` found at ``path``; ``given`` are
    fields set by the caller (not read from the YAML), the rest keep ``cls``'s defaults."""
    values = read_fields(r, cls, raw, path)
    with named(r, path):
        return cls(**{**given, **values})


def overrides_from(
    r: Reader, cls: type[Any], raw: Any, path: str, build: Callable[[Mapping[str, Any]], object]
) -> Mapping[str, Any]:
    """The keys of ``raw`` (fields of ``cls``, checked by kind) as given, once ``build`` has
    accepted them over some base (it raises :class:`SettingsError` for a value ``cls``
    refuses)."""
    values = read_fields(r, cls, raw, path)
    with named(r, path):
        build(values)
    return types.MappingProxyType(values)
