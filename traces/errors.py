"""What can go wrong with a trace.

::

    TraceError            base class; every trace problem is one
    ├── BadTraceLine      a line of a file holds a value that is not valid here
    └── TraceNotFound     a file or named shortcut could not be located
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class TraceError(ValueError):
    """A trace could not be read or used."""


class BadTraceLine(TraceError):
    """Line ``line`` (1-based) of ``path`` holds ``value``, which is not valid for the format."""

    def __init__(self, path: str | Path, line: int, value: str, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.value = value
        self.reason = reason
        super().__init__(f"{self.path}:{line}: bad value {value!r}: {reason}")


class TraceNotFound(TraceError):
    """``name`` is neither an existing file nor a shared trace found in ``searched``."""

    def __init__(self, name: str, searched: Sequence[str | Path], hint: str = "") -> None:
        self.name = name
        self.searched = tuple(str(p) for p in searched)
        where = ", ".join(self.searched) or "nowhere"
        message = f"trace {name!r} not found (looked in: {where})"
        super().__init__(f"{message}; {hint}" if hint else message)
