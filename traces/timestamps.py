"""CSV files of request timestamps: one request per row.

The timestamp column is the first one unless ``column`` names another (by header name or
0-based index). Values are seconds (epoch or relative, possibly fractional) or ISO-8601 date-times
(``2021-08-01T12:00:00.250Z``; a date-time without a zone is taken as UTC). A header row is
recognised when its timestamp cell is not a timestamp. Rows need not be sorted.

Times are returned relative to the earliest timestamp, so a file's first request is at 0 s.
"""

from __future__ import annotations

import csv
import math
from datetime import UTC, datetime
from pathlib import Path

from traces.errors import BadTraceLine, TraceError
from traces.rates import open_text


def _parse_time(text: str) -> float | None:
    """Seconds since the epoch (or the file's own origin) for ``text``, or None."""
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) else None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _column_index(header: list[str], column: str | int, path: Path) -> int:
    if isinstance(column, int):
        return column
    names = [name.strip() for name in header]
    if column in names:
        return names.index(column)
    raise TraceError(f"{path}: no column {column!r} in header {names}")


def read_timestamps(path: Path, *, column: str | int = 0) -> list[float]:
    """Sorted request times in seconds after the earliest one."""
    if isinstance(column, int) and column < 0:
        raise TraceError(f"{path}: column index must be non-negative, got {column}")
    times: list[float] = []
    index = column if isinstance(column, int) else -1
    first = True
    with open_text(path) as f:
        for number, row in enumerate(csv.reader(f), start=1):
            cells = [cell.strip() for cell in row]
            if not any(cells) or cells[0].startswith("#"):
                continue
            if first and (index < 0 or _is_header(cells, index)):
                first = False
                index = _column_index(cells, column, path)
                continue
            first = False
            if index >= len(cells):
                raise BadTraceLine(path, number, ",".join(cells), f"no column {index}")
            value = _parse_time(cells[index])
            if value is None:
                raise BadTraceLine(
                    path, number, cells[index], "not seconds or an ISO-8601 date-time"
                )
            times.append(value)
    if not times:
        raise TraceError(f"{path}: no timestamps")
    times.sort()
    origin = times[0]
    return [t - origin for t in times]


def _is_header(cells: list[str], index: int) -> bool:
    return index >= len(cells) or _parse_time(cells[index]) is None


def counts_per_second(times_s: list[float]) -> list[float]:
    """Requests per whole second for sorted ``times_s`` starting at 0."""
    if not times_s:
        return []
    counts = [0.0] * (int(times_s[-1]) + 1)
    for t in times_s:
        counts[int(t)] += 1.0
    return counts
