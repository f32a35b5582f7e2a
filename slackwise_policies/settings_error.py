"""What every policy's settings type shares: the one error of the policies package, which names
the bad key and its value, and the checks that raise it.

Each policy owns its settings type (frozen, keyword-only, one default a field, checked in
``__post_init__``): :class:`slackwise_policies.aimd.AIMDSettings`,
:class:`slackwise_policies.advisor_config.AdvisorConfig`,
:class:`slackwise_policies.advisor_settings.AdvisorSettings`... The YAML loader
(:mod:`slackwise_config`) builds those types directly and prefixes ``key`` with the file and the
section it read, so a user reads ``slackwise.yaml: adapter.aimd.mult: must be within (0, 1),
got 1.5``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["SettingsError", "boolean", "integer", "number", "one_of", "within"]


class SettingsError(ValueError):
    """A policy setting out of range: ``key`` is the field, ``reason`` says what it must be
    and what it was."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key} {reason}")
        self.key = key
        self.reason = reason


def number(key: str, value: float, *, low: float = 0.0, allow_low: bool = False) -> None:
    """``value`` is a finite number above ``low`` (or equal to it with ``allow_low``)."""
    real = not isinstance(value, bool) and isinstance(value, (int, float))
    if not (real and math.isfinite(value) and (value >= low if allow_low else value > low)):
        bound = f">= {low:g}" if allow_low else f"> {low:g}"
        raise SettingsError(key, f"must be a finite number {bound}, got {value!r}")


def within(key: str, value: float, low: float, high: float, *, closed: str = "()") -> None:
    """``value`` lies between ``low`` and ``high``; ``closed`` is the interval's brackets."""
    real = not isinstance(value, bool) and isinstance(value, (int, float))
    above = real and (value >= low if closed[0] == "[" else value > low)
    below = real and (value <= high if closed[1] == "]" else value < high)
    if not (above and below):
        raise SettingsError(
            key, f"must be within {closed[0]}{low:g}, {high:g}{closed[1]}, got {value!r}"
        )


def integer(key: str, value: int, minimum: int) -> None:
    """``value`` is an integer of at least ``minimum`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SettingsError(key, f"must be an integer >= {minimum}, got {value!r}")


def boolean(key: str, value: bool) -> None:
    """``value`` is true or false."""
    if not isinstance(value, bool):
        raise SettingsError(key, f"must be true or false, got {value!r}")


def one_of(key: str, value: str, allowed: Iterable[str]) -> None:
    """``value`` is one of ``allowed``."""
    names = tuple(allowed)
    if value not in names:
        raise SettingsError(key, f"must be one of {', '.join(names)}, got {value!r}")
