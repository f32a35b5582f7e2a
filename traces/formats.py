"""Reading a trace file of any supported format into a ``Trace`` (or exact arrival times).

Formats: ``autoscale`` (rates, one per line), ``counts`` (integer requests per second, one per
line) and ``timestamps`` (CSV, one request per row); see ``traces.rates`` and
``traces.timestamps``. ``detect_format`` picks one from the file name and, failing that, from
the first value in the file; ``format=`` overrides it.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Literal

from traces.errors import TraceError
from traces.rates import numbered_values, open_text, parse_count, parse_rate, read_values
from traces.timestamps import counts_per_second, read_timestamps
from traces.trace import Trace

logger = logging.getLogger(__name__)

Format = Literal["autoscale", "counts", "timestamps"]
FORMATS: tuple[Format, ...] = ("autoscale", "counts", "timestamps")

_AUTOSCALE_NAME = re.compile(r"^trace_[a-z0-9]+\.txt(\.gz)?$", re.IGNORECASE)
_INTEGER = re.compile(r"^\d+$")


def detect_format(path: Path) -> Format:
    """The format of ``path``: by name (``.csv``, ``.rps.txt``, ``trace_*.txt``), else content."""
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        return "timestamps"
    if name.endswith((".rps.txt", ".rps.txt.gz")):
        return "counts"
    if _AUTOSCALE_NAME.match(name):
        return "autoscale"
    with open_text(path) as f:
        for _, text in numbered_values(f):
            if "," in text or ";" in text or isinstance(parse_rate(text), str):
                return "timestamps"
            return "counts" if _INTEGER.match(text) else "autoscale"
    raise TraceError(f"{path}: empty file, cannot tell its format")


def _check_format(path: Path, format: str | None) -> Format:
    if format is None:
        return detect_format(path)
    for known in FORMATS:
        if format == known:
            return known
    raise TraceError(f"{path}: unknown format {format!r}; known: {', '.join(FORMATS)}")


def _window_steps(start_s: float, duration_s: float | None, path: Path) -> tuple[int, int | None]:
    if not (math.isfinite(start_s) and start_s >= 0):
        raise TraceError(f"{path}: start_s must be a non-negative number, got {start_s!r}")
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise TraceError(f"{path}: duration_s must be a positive number, got {duration_s!r}")
    start = int(start_s)
    if start != start_s:
        raise TraceError(f"{path}: start_s must be a whole number of seconds, got {start_s}")
    return start, None if duration_s is None else math.ceil(duration_s)


def _describe(path: Path, format: Format, start: int, count: int | None, got: int) -> str:
    if start == 0 and count is None:
        return f"{path} ({format}, {got} s)"
    return f"{path} ({format}, seconds {start}..{start + got})"


def load_trace(
    path: str | Path,
    *,
    format: str | None = None,
    start_s: float = 0.0,
    duration_s: float | None = None,
    column: str | int = 0,
) -> Trace:
    """The per-second rates of ``path``, optionally only the window ``[start_s, +duration_s)``.

    Every format yields one step per second of the source (``step_s`` 1): for AutoScale files,
    one step per line. Timestamp CSVs are counted per second after their first request. A window
    reaching past the end of the file is cut short there (check ``len(trace)``).
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    kind = _check_format(path, format)
    start, count = _window_steps(start_s, duration_s, path)
    if kind == "timestamps":
        rates = counts_per_second(read_timestamps(path, column=column))
        if start >= len(rates):
            raise TraceError(f"{path}: window starts at {start} s, after the last request")
        rates = rates[start:] if count is None else rates[start : start + count]
    else:
        parse = parse_count if kind == "counts" else parse_rate
        rates = read_values(path, parse, start=start, count=count)
    logger.debug("loaded %d steps from %s", len(rates), path)
    return Trace(tuple(rates), 1.0, _describe(path, kind, start, count, len(rates)), False)


def load_arrivals(
    path: str | Path,
    *,
    start_s: float = 0.0,
    duration_s: float | None = None,
    column: str | int = 0,
) -> list[float]:
    """Exact request times (seconds from the window's start) of a timestamp CSV."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    if not (math.isfinite(start_s) and start_s >= 0):
        raise TraceError(f"{path}: start_s must be a non-negative number, got {start_s!r}")
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise TraceError(f"{path}: duration_s must be a positive number, got {duration_s!r}")
    end_s = math.inf if duration_s is None else start_s + duration_s
    return [t - start_s for t in read_timestamps(path, column=column) if start_s <= t < end_s]
