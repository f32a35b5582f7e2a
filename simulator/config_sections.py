"""Sections of a simulator config read on their own: the batching settings (the live adapter's
keys), the rate search and the trace window (:mod:`simulator.config` reads the whole file)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slackwise_config import Reader
from slackwise_config.experiment import disturbance
from slackwise_config.model import Disturbance
from slackwise_config.typed import settings_from
from slackwise_policies.batching_settings import SIMULATOR_P95_EVERY, BatchingSettings

__all__ = [
    "SearchConfig",
    "TraceConfig",
    "read_batching",
    "read_classes",
    "read_disturbance",
    "read_search",
    "read_trace",
]


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    requests: int = 20000
    tolerance: float = 0.02
    low_rps: float = 1.0
    high_rps: float = 1e6


@dataclass(frozen=True, kw_only=True)
class TraceConfig:
    name: str
    start_s: float = 0.0
    duration_s: float | None = None
    downsample: int = 1
    step_s: float | None = None


def read_batching(r: Reader, adapter: Mapping[str, Any]) -> BatchingSettings:
    """The live adapter's batching settings from the same keys (no path margin: nothing here
    lies outside the batch round trip)."""
    keys = ("max_wait_ms", "estimate_alpha", "wait_utilization")
    given = {k: adapter[k] for k in keys if adapter.get(k) is not None}
    return settings_from(
        r, BatchingSettings, given, "adapter", path_margin_ms=0.0, p95_every=SIMULATOR_P95_EVERY
    )


def read_search(r: Reader, search_raw: Mapping[str, Any]) -> SearchConfig:
    r.only(search_raw, "search", {"requests", "tolerance", "low_rps", "high_rps"})
    search = SearchConfig(
        requests=r.integer(search_raw, "requests", "search", 20000, low=1),
        tolerance=r.number(search_raw, "tolerance", "search", 0.02, low=1e-4),
        low_rps=r.number(search_raw, "low_rps", "search", 1.0, low=1e-6),
        high_rps=r.number(search_raw, "high_rps", "search", 1e6, low=1e-6),
    )
    if search.high_rps <= search.low_rps:
        raise r.fail("search.high_rps", f"must exceed low_rps, got {search.high_rps:g}")
    return search


def read_trace(r: Reader, t: Mapping[str, Any]) -> TraceConfig:
    r.only(t, "trace", {"name", "start_s", "duration_s", "downsample", "step_s"})
    duration = None
    if t.get("duration_s") is not None:
        duration = r.number(t, "duration_s", "trace", 0.0, low=1e-3)
    step = None
    if t.get("step_s") is not None:
        step = r.number(t, "step_s", "trace", 1.0, low=1e-3)
    return TraceConfig(
        name=r.string(t, "name", "trace", None),
        start_s=r.number(t, "start_s", "trace", 0.0),
        duration_s=duration,
        downsample=r.integer(t, "downsample", "trace", 1, low=1),
        step_s=step,
    )


def read_classes(r: Reader, data: Mapping[str, Any], key: str, path: str) -> dict[str, float]:
    """``key``: a mapping of input-size class to a positive number (an app's mix of input sizes,
    or a function's cost of one instance of each class); empty when absent."""
    raw = r.mapping(data.get(key), f"{path}.{key}")
    return {name: r.number(raw, name, f"{path}.{key}", 1.0, low=1e-9) for name in raw}


def read_disturbance(r: Reader, raw: Any, trace: TraceConfig | None) -> Disturbance | None:
    """``disturbance``: the live experiment's keys (``slackwise_config.experiment``), of
    the kinds the simulator applies (:mod:`simulator.disturbance`), within the trace's window;
    None when absent."""
    from simulator.disturbance import SIMULATED

    if raw is None:
        return None
    length = trace.duration_s if trace is not None and trace.duration_s is not None else None
    d = disturbance(r, raw, "disturbance", float("inf") if length is None else length)
    if d.kind not in SIMULATED:
        why = {
            "cpu": "it has no cores for busy processes to take",
            "input": "its service curves price a batch by size, not by input; a slow "
            "disturbance with the measured ratio is the same step",
        }[d.kind]
        raise r.fail(
            "disturbance.kind",
            f"the simulator applies {' or '.join(SIMULATED)} ({why}), got {d.kind!r}",
        )
    return d
