"""What Swayam's clairvoyant baselines provision, found against the simulator itself.

ClairA1 and ClairA2 (Swayam §5, Fig. 9) know every future arrival and run, in each window, the
fewest backends that meet the SLA. A model of the response time would make them only as good as
the model: built on the analytic percentile model they complied in 60–94 % of the windows. Here
the count is found by running the simulator:

1. **Per rate** (:func:`simulated_need`): a fixed fleet serves Poisson arrivals at the window's
   rate (rounded up to a 5 % grid), the same function, stage policy and service curve, and the
   count is the fewest replicas whose every sliding window of ``window`` requests meets the SLA
   (Swayam's compliance at 100 %). Counts are monotone in the rate, so each grid point starts its
   search at the answer of the one below.
2. **Over the trace** (:func:`late_ticks`, driven by
   :func:`simulator.comparison.scaler_run`): the clairvoyant runs over the real arrivals; the
   ticks in which a request finished late inside a non-compliant window get one more replica,
   and the run is repeated, up to ``clair_rounds`` times or until every window complies. What
   the stationary search cannot see (a rate that changes within a window, the queue a busy tick
   hands to the next) is then paid for where it happened, and nowhere else.

Both are deterministic for a seed; the number of rounds a config needed is reported with its row.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from simulator.compliance import compliance_pct
from simulator.config import SimConfig
from simulator.engine import Simulation
from simulator.scalers import FixedScaler
from simulator.service import ServiceCurve
from slackwise_policies.slack import StagePolicy

__all__ = ["late_ticks", "simulated_need"]

#: rates are rounded up to powers of this (so a window's need is for at least its rate)
_GRID = 1.05


def simulated_need(
    config: SimConfig,
    function: str,
    curve: ServiceCurve,
    policy: StagePolicy,
    *,
    slo_ms: float,
    level_pct: float,
    window: int,
    step: int,
    max_replicas: int,
    requests: int | None = None,
    seed: int = 1,
) -> Callable[[float], int]:
    """``need(rate)``: the fewest replicas of ``function`` meeting the SLA in every window at
    ``rate`` (see the module docstring); ``max_replicas`` when none up to it does."""
    fn = config.functions[function]
    count = requests or max(6 * window, 4000)
    answers: dict[int, int] = {}

    def complies(replicas: int, rate: float) -> bool:
        run_config = replace(
            config,
            scaling="fixed",
            warmup_fraction=0.0,
            functions={function: replace(fn, nodes=replicas, cold_start_s=0.0)},
        )
        rng = random.Random(seed)
        t, arrivals = 0.0, []
        for _ in range(count):
            t += rng.expovariate(rate)
            arrivals.append(t)
        sim = Simulation(
            run_config,
            policy,
            {function: curve},
            rate_rps=rate,
            requests=count,
            seed=seed,
            scaler=FixedScaler({function: replicas}),
            arrivals=arrivals,
        )
        sim.run()
        latencies, _ = sim.latencies_by_arrival()
        compliant = compliance_pct(
            latencies, rt_max_ms=slo_ms, service_level_pct=level_pct, window=window, step=step
        )
        return compliant >= 100.0

    def need(rate: float) -> int:
        if rate <= 0.0:
            return 0
        k = math.ceil(math.log(rate) / math.log(_GRID) - 1e-9)
        hit = answers.get(k)
        if hit is not None:
            return hit
        below = [n for j, n in answers.items() if j < k]
        above = [n for j, n in answers.items() if j > k]
        n = max(below, default=1)
        ceiling = min(above, default=max_replicas)
        grid_rate = _GRID**k
        while n < ceiling and not complies(n, grid_rate):
            n += 1
        answers[k] = n
        return n

    return need


def late_ticks(
    latencies_ms: np.ndarray,
    arrivals: Sequence[float],
    *,
    slo_ms: float,
    level_pct: float,
    window: int,
    step: int,
    tick_s: float,
) -> set[int]:
    """The ticks (``⌊arrival / tick_s⌋``) of the late requests that sit in a window missing the
    SLA (latencies and arrivals in arrival order, one each)."""
    late = latencies_ms > slo_ms
    n = len(late)
    if n == 0:
        return set()
    size = min(window, n)
    allowed = size - math.ceil(level_pct / 100.0 * size - 1e-9)
    cumulative = np.concatenate(([0], np.cumsum(late, dtype=np.int64)))
    starts = np.arange(0, n - size + 1, step)
    failing = starts[(cumulative[starts + size] - cumulative[starts]) > allowed]
    if len(failing) == 0:
        return set()
    covered = np.zeros(n + 1, dtype=np.int64)
    np.add.at(covered, failing, 1)
    np.add.at(covered, failing + size, -1)
    inside = np.cumsum(covered[:n]) > 0
    times = np.asarray(arrivals, dtype=np.float64)
    return {int(t // tick_s) for t in times[inside & late]}
