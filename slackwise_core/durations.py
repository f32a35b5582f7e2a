"""Go-style durations as Knative writes them in annotations and config maps ("60s", "1m30s")."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string; raises ValueError naming the text."""
    value = text.strip()
    sign = 1.0
    if value[:1] in ("+", "-"):  # Go accepts a sign; callers check the range
        sign = -1.0 if value[0] == "-" else 1.0
        value = value[1:]
    if value == "":
        raise ValueError(f"{text!r} is not a duration like '60s', '1m30s' or '500ms'")
    if value == "0":
        return 0.0
    pos = 0
    total = 0.0
    for match in _PART.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if pos != len(value) or pos == 0:
        raise ValueError(f"{text!r} is not a duration like '60s', '1m30s' or '500ms'")
    return sign * total


def format_duration(seconds: float) -> str:
    """The shortest Go duration string for whole or fractional seconds ("6s", "1.5s")."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:g}s"
