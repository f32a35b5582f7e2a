"""The minimal clairvoyant rows of the comparison: ``minimal_a1`` and ``minimal_a2``.

Each starts from per-window counts found against the simulator (:mod:`simulator.clairvoyance`)
and re-runs the same seeded run (arrivals and service times) under them: a replica is added
wherever a window still misses the SLA (up to ``autoscaling.clair_rounds`` rounds), then, for
ClairA2 with ``clair_trim``, the counts are trimmed to minimal ones (:mod:`simulator.clair_trim`).
ClairA1 starts replicas with no setup time and collects them at once; ClairA2 provisions each
a setup time ahead and collects them lazily (``collect_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simulator.clair_trim import Spans, trim
from simulator.clairvoyance import late_ticks
from simulator.comparison_case import Case, scaler_row
from simulator.config import SimConfig
from simulator.engine import Simulation
from simulator.results import SimResult
from simulator.swayam_scalers import Clairvoyant

__all__ = ["Reruns", "minimal_row"]

#: how long after the last tick whose provisioning a trim lowers (beyond a setup time) a late
#: request is put down to that trim
_BLAME_AFTER_S = 30.0


@dataclass(frozen=True)
class Reruns:
    """The same seeded run of a minimal clairvoyant, under any window counts."""

    #: the config it runs (``minimal_a1``: the function with no cold start)
    config: SimConfig
    case: Case
    #: how far ahead each function's replicas are provisioned (``minimal_a1``: not at all)
    ahead_s: dict[str, float]
    #: how long an unused replica stays (``minimal_a1``: 0, collected at once)
    collect_s: float

    @classmethod
    def of(cls, config: SimConfig, name: str, case: Case) -> Reruns:
        """``name``'s re-runs (``minimal_a1`` or ``minimal_a2``) of ``case``."""
        fn_name = case.fn_name
        fn = config.functions[fn_name]
        run_config = config
        if name == "minimal_a1":
            run_config = replace(config, functions={fn_name: replace(fn, cold_start_s=0.0)})
        ahead = {} if name == "minimal_a1" else {fn_name: case.setup_s}
        collect = 0.0 if name == "minimal_a1" else case.auto.collect_s
        return cls(run_config, case, ahead, collect)

    def run(self, counts: dict[str, list[int]]) -> tuple[SimResult, np.ndarray, set[int] | None]:
        """The same seeded run (arrivals and service times) under ``counts``: its result,
        latencies, and the ticks of late requests in failing windows (None: some never
        finished)."""
        case, auto = self.case, self.case.auto
        scaler = Clairvoyant(
            counts, tick_s=auto.tick_s, lookahead_s=self.ahead_s, collect_s=self.collect_s
        )
        sim = Simulation(
            self.config,
            case.policy,
            case.curves,
            rate_rps=case.rate_rps,
            requests=len(case.arrivals),
            seed=case.seed,
            scaler=scaler,
            arrivals=case.arrivals,
        )
        result = sim.run()
        latencies, _ = sim.latencies_by_arrival()
        if len(latencies) != len(case.arrivals):
            return result, latencies, None
        return (
            result,
            latencies,
            late_ticks(
                latencies,
                case.arrivals,
                slo_ms=case.slo_ms,
                level_pct=case.level,
                window=auto.window,
                step=auto.step,
                tick_s=auto.tick_s,
            ),
        )


def minimal_row(
    config: SimConfig, name: str, case: Case, counts: dict[str, list[int]]
) -> dict[str, Any]:
    """ClairA1 or ClairA2 over the same seeded run: repaired where windows fail, then (ClairA2,
    with ``clair_trim``) trimmed to the minimal count (:mod:`simulator.clair_trim`); its row of
    the comparison."""
    auto = case.auto
    reruns = Reruns.of(config, name, case)
    rounds = 0
    result, latencies, ticks = reruns.run(counts)
    row = counts[case.fn_name]
    while rounds < auto.clair_rounds and ticks:
        raised = [t for t in ticks if 0 <= t < len(row) and row[t] < case.cap]
        if not raised:
            break
        for t in raised:
            row[t] += 1
        rounds += 1
        result, latencies, ticks = reruns.run(counts)
    trim_out: dict[str, Any] = {}
    if auto.clair_trim and name == "minimal_a2" and ticks == set():
        result, latencies, trim_out = _trimmed(reruns, counts, result, latencies)
    out = scaler_row(
        name, result, latencies, case.slo_ms, case.level, auto, case.setup_s, None, rounds
    )
    return out | trim_out


def _trimmed(
    reruns: Reruns, counts: dict[str, list[int]], result: SimResult, latencies: np.ndarray
) -> tuple[SimResult, np.ndarray, dict[str, Any]]:
    """ClairA2's compliant ``counts`` trimmed in place to minimal ones: the best run's result
    and latencies, and what the trim did (the ``clair_trim*`` entries of its row)."""
    auto, fn_name = reruns.case.auto, reruns.case.fn_name
    row = counts[fn_name]
    ahead_s = reruns.ahead_s.get(fn_name, 0.0)
    spans = Spans.of(len(row), tick_s=auto.tick_s, ahead_s=ahead_s, collect_s=reruns.collect_s)

    def trial() -> tuple[tuple[SimResult, np.ndarray], set[int] | None]:
        res, lat, late = reruns.run(counts)
        return (res, lat), late

    untrimmed = round(result.replica_seconds, 3)
    done = trim(
        row,
        trial,
        spans=spans,
        budget=auto.clair_trim,
        best=(result, latencies),
        after_s=ahead_s + _BLAME_AFTER_S,
    )
    result, latencies = done.best
    return (
        result,
        latencies,
        {
            "clair_trimmed": done.removed,
            "clair_trimmed_free": done.free,
            "clair_trim_runs": done.runs,
            "clair_trim_finished": done.finished,
            "clair_untrimmed_replica_seconds": untrimmed,
            "clair_counts": list(row),
        },
    )
