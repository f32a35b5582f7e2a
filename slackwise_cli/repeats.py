"""Repeated live runs: each repeat runs every mode, in an order rotated from one repeat to the
next (so no mode always runs first on a cold machine, or last on a warm one), with its own seed;
tables quote the median of the repeats and their range.

Two runs of the same command differ (the machine's other work, the arrivals' seed, the cold
starts' timing), by several times in some cells; one run cannot tell an effect from noise.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import subprocess
from pathlib import Path
from typing import Any

from slackwise_cli.results import ExperimentResult

__all__ = ["commit", "order", "summarize_repeats"]


def order(modes: tuple[str, ...], repeat: int) -> tuple[str, ...]:
    """The modes of repeat ``repeat`` (0-based): rotated by one each repeat."""
    k = repeat % len(modes) if modes else 0
    return modes[k:] + modes[:k]


def _numbers(values: list[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not math.isnan(float(v))]


def summarize_repeats(results: list[ExperimentResult]) -> dict[str, Any]:
    """The JSON of a repeated experiment: every run, and per mode and metric the median (under
    ``modes``, where single-run readers look) and ``[low, high]`` (under ``ranges``)."""
    first = results[0].to_json()
    modes: dict[str, dict[str, Any]] = {}
    ranges: dict[str, dict[str, list[float]]] = {}
    for mode in first["modes"]:
        rows = [dataclasses.asdict(r.modes[mode]) for r in results if mode in r.modes]
        median: dict[str, Any] = {}
        spread: dict[str, list[float]] = {}
        for key, value in rows[0].items():
            if key == "timeline":  # each run's own, under runs: a median of series means nothing
                continue
            numbers = _numbers([row[key] for row in rows])
            if isinstance(value, int | float) and numbers:
                median[key] = round(statistics.median(numbers), 3)
                spread[key] = [min(numbers), max(numbers)]
            elif isinstance(value, dict) and key == "window" and value:
                median[key] = {
                    k: round(statistics.median(_numbers([row[key][k] for row in rows])), 3)
                    for k in value
                }
            else:
                median[key] = value
        modes[mode] = median
        ranges[mode] = spread
    doc = {**first, "modes": modes, "ranges": ranges, "repeats": len(results)}
    doc["runs"] = [r.to_json() for r in results]
    doc["seeds"] = [r.seed for r in results]
    return doc


def commit(root: Path) -> str:
    """The code revision the numbers came from (``unknown`` outside a checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()
