"""Reading typed values out of a parsed YAML document, naming the file and key path in errors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slackwise_core.errors import CoreError

__all__ = [
    "ConfigError",
    "Reader",
    "choice",
    "field_defaults",
    "flag",
    "fraction",
    "name_list",
    "optional_string",
    "read_yaml",
    "stage_list",
]


class ConfigError(CoreError, ValueError):
    """A bad configuration value; the message names the file, the key and the value."""


class Reader:
    """Reads typed values out of nested mappings, naming the file and key path in errors."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {path}: {message}")

    @staticmethod
    def at(path: str, key: str) -> str:
        """Where ``key`` of the section at ``path`` is (the key alone at the top level)."""
        return f"{path}.{key}" if path else key

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be a mapping, got {value!r}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(path, f"keys must be strings, got {key!r}")
        return value

    def only(self, data: Mapping[str, Any], path: str, allowed: set[str]) -> None:
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise self.fail(
                self.at(path, unknown[0]),
                f"unknown key; expected one of {', '.join(sorted(allowed))}",
            )

    def integer(
        self,
        data: Mapping[str, Any],
        key: str,
        path: str,
        default: int,
        *,
        low: int = 0,
        high: int | None = None,
    ) -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(self.at(path, key), f"must be an integer, got {value!r}")
        if value < low:
            raise self.fail(self.at(path, key), f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise self.fail(self.at(path, key), f"must be <= {high}, got {value}")
        return value

    def number(
        self,
        data: Mapping[str, Any],
        key: str,
        path: str,
        default: float,
        *,
        low: float = 0.0,
        high: float = math.inf,
    ) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(self.at(path, key), f"must be a number, got {value!r}")
        if value < low:
            raise self.fail(self.at(path, key), f"must be >= {low:g}, got {value}")
        if value > high:
            raise self.fail(self.at(path, key), f"must be <= {high:g}, got {value}")
        return float(value)

    def positive(self, data: Mapping[str, Any], key: str, path: str, default: float) -> float:
        """A number above zero."""
        value = self.number(data, key, path, default, low=-math.inf)
        if value <= 0:
            raise self.fail(self.at(path, key), f"must be positive, got {value:g}")
        return value

    def string(self, data: Mapping[str, Any], key: str, path: str, default: str | None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str) or not value:
            raise self.fail(self.at(path, key), f"must be a non-empty string, got {value!r}")
        return value

    def strings(self, value: Any, path: str) -> dict[str, str]:
        data = self.mapping(value, path)
        out: dict[str, str] = {}
        for key, item in data.items():
            if not isinstance(item, str):
                raise self.fail(self.at(path, key), f"must be a string (quote it), got {item!r}")
            out[key] = item
        return out


def choice(
    r: Reader, data: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...], default: str
) -> str:
    value = r.string(data, key, path, default)
    if value not in allowed:
        raise r.fail(r.at(path, key), f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def optional_string(r: Reader, data: Mapping[str, Any], key: str, path: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise r.fail(r.at(path, key), f"must be a non-empty string, got {value!r}")
    return value


def fraction(r: Reader, data: Mapping[str, Any], key: str, path: str, default: float) -> float:
    value = r.number(data, key, path, default)
    if not 0.0 < value <= 1.0:
        raise r.fail(r.at(path, key), f"must be in (0, 1], got {value:g}")
    return value


def flag(r: Reader, data: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise r.fail(r.at(path, key), f"must be true or false, got {value!r}")
    return value


def name_list(r: Reader, data: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    """A list of names under ``key`` (empty when absent); anything else is named."""
    listed = data.get(key, [])
    if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
        raise r.fail(r.at(path, key), f"must be a list of function names, got {listed!r}")
    return tuple(listed)


def stage_list(
    r: Reader, data: Mapping[str, Any], path: str, functions: Mapping[str, Any]
) -> list[str]:
    """An app's ``stages``: a non-empty list, each one of ``functions``."""
    stages = data.get("stages")
    if not isinstance(stages, list) or not stages:
        raise r.fail(f"{path}.stages", f"must be a non-empty list of functions, got {stages!r}")
    for i, stage in enumerate(stages):
        if stage not in functions:
            raise r.fail(f"{path}.stages[{i}]", f"no function named {stage!r}")
    return stages


def read_yaml(path: str | Path) -> Any:
    """The YAML document in the file at ``path``; a :class:`ConfigError` naming the file when
    it cannot be read or parsed."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


def field_defaults(cls: type) -> dict[str, Any]:
    """The default of each field of the dataclass ``cls`` that has one (the config model's
    defaults, written once there, for readers to fall back on)."""
    import dataclasses

    return {
        f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
    }
