"""The cheapest a scaler that sees only the past can be: a frontier for Swayam's Fig. 9.

Fig. 9's target asks an online scaler for a fraction of ClairA2's replica-seconds at ≥ 99 %
window compliance. ClairA2 knows each window's need ahead of time; an online scaler does not,
and pays a setup time for every replica it starts on seeing a need. To tell a scaler that is
merely imperfect from a target no online scaler can meet, this runs the strongest past-only
rule there is short of a forecast, with knowledge no live scaler has:

* each 1 s window's **need** is exact: the same simulated need the clairvoyants use
  (:func:`simulator.clairvoyance.simulated_need`, the fewest replicas that meet the SLA at that
  window's *realised* rate), at ``burst_u`` times the rate (headroom, Swayam's ``U``);
* the count in window ``k`` is the largest need of the ``hold`` windows before it
  (:func:`hindsight_counts`): it holds the recent peak for ``hold_s``, then lets it go;
* replicas it starts pay the real setup time, as every online scaler's do; at time 0 it has the
  same initial replicas as the KPA, the advisor and slackwise.

Swept over ``hold_s`` × ``burst_u`` (``benchmarks/scaler_frontier.py``), its cheapest compliant
point says what reacting to the past can reach on a trace; beating it needs a forecast of the
bursts themselves. It is a reference, not a bound: a forecaster that knows the trace's rhythm
could do better.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from simulator.clairvoyance import simulated_need
from simulator.comparison import clairvoyant_service
from simulator.comparison_case import bootstrap_count, case_for, scaler_row
from simulator.config import SimConfig
from simulator.engine import Simulation
from simulator.swayam_scalers import Clairvoyant, window_needs
from slackwise_policies.percentile import min_replicas

__all__ = ["hindsight_counts", "hindsight_run"]


def hindsight_counts(needs: Sequence[int], hold: int, initial: int) -> list[int]:
    """Each window's count: the largest need among the ``hold`` windows before it (the window
    itself is not seen yet); windows before the first needed ``initial``."""
    if hold < 1:
        raise ValueError(f"hold must be >= 1 window, got {hold!r}")
    out: list[int] = []
    peak: deque[tuple[int, int]] = deque([(-1, initial)])  # (window, need), needs falling
    for k, need in enumerate(needs):
        while peak and peak[0][0] < k - hold:
            peak.popleft()
        out.append(peak[0][1] if peak else 0)
        while peak and peak[-1][1] <= need:
            peak.pop()
        peak.append((k, need))
    return out


def hindsight_run(
    config: SimConfig, *, hold_s: float, burst_u: float, rate_rps: float, seed: int
) -> dict[str, Any]:
    """The past-only scaler over the config's single-function workload (Fig. 9's setup, the
    same seeded arrivals and service times as the other scalers); its row, with its settings."""
    case = case_for(config, rate_rps, seed)
    fn_name, policy, curves, _, _, arrivals, auto, slo_ms, level, setup_s, cap = case
    fn = config.functions[fn_name]
    curve = curves[fn_name]
    need = simulated_need(
        config,
        fn_name,
        curve,
        policy,
        slo_ms=slo_ms,
        level_pct=level,
        window=auto.window,
        step=auto.step,
        max_replicas=cap,
        seed=seed,
    )
    needs = window_needs(arrivals, tick_s=auto.tick_s, need=lambda rate: need(burst_u * rate))
    service = clairvoyant_service(
        curve, batch_limit=policy.batch_limit(fn.max_batch), slots=fn.container_concurrency
    )
    initial = bootstrap_count(  # what the KPA, the advisor and slackwise start with
        case, lambda rate: min_replicas(rate, slo_ms, level, service, max_replicas=cap)
    )
    hold = max(1, round(hold_s / auto.tick_s))
    scaler = Clairvoyant({fn_name: hindsight_counts(needs, hold, initial)}, tick_s=auto.tick_s)
    sim = Simulation(
        config,
        policy,
        curves,
        rate_rps=rate_rps,
        requests=len(arrivals),
        seed=seed,
        scaler=scaler,
        arrivals=arrivals,
    )
    result = sim.run()
    latencies, _ = sim.latencies_by_arrival()
    row = scaler_row("hindsight", result, latencies, slo_ms, level, auto, setup_s, initial, None)
    return {"hold_s": hold_s, "burst_u": burst_u, **row}
