"""The advisor's driver: every function's autoscaler, fed from the request path, and what each
decision asks the platform to hold (pure, clock-injected).

One driver runs everywhere the advisor decides, as one :class:`slackwise_policies.controller.
Controller` runs every batching decision: the live adapter's loop
(:class:`adapter.serving.advisor_loop.Autoscaling`) feeds it what its requests report and
writes what it asks for to the platform; the simulator's scalers
(:mod:`simulator.swayam_scalers`) feed it the engine's events and apply what it asks for to the
simulated fleet. What the driver decides:

* **Owning or pinning.** With ``capacity: own`` each decision *is* the function's replica count;
  otherwise it is a floor (Knative's min-scale) under the platform's KPA, released (``None``:
  back to the configured min-scale) when it falls to zero.
* **Nothing before demand.** While a function has seen no arrival, an owned count is not
  decided: the platform's (or the simulation's) initial count stands.
* **When to write.** A floor is written when it changes; an owned count also every third of
  its lease (``lease_s``) while unchanged, so the lease stays alive and a restarted platform
  hears it again.
* **A miss asks for a decision at once** (Swayam Algorithm 1, lines 4–5), at most every
  ``urgent_gap_s`` per function, and only when the driver owns the count (a floor moves on its
  ticks; the KPA decides above it).

Both sides call these with the time first (``now, function, ...``), as every policy does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.function_autoscaler import FunctionAutoscaler, function_autoscaler
from slackwise_policies.latency import LatencyModel

__all__ = ["URGENT_GAP_S", "AdvisorDriver", "Step"]

#: the least time between two decisions that misses ask for, per function
URGENT_GAP_S = 0.1


@dataclass(frozen=True, slots=True)
class Step:
    """One function's decision at a tick."""

    #: the count the advisor (with keep-alive and evidence) decided: the replicas when it owns
    #: the count, else the floor under the KPA
    count: int
    #: what the platform is to hold: ``count``, or None for a floor of zero (the configured
    #: min-scale again)
    target: int | None
    #: whether to write ``target`` now: it changed, or an owned count's lease is due
    write: bool


class AdvisorDriver:
    """Every function's :class:`FunctionAutoscaler` and the rules above."""

    def __init__(
        self,
        settings: AdvisorSettings,
        *,
        owns: bool,
        lease_s: float | None = None,
        urgent_gap_s: float = URGENT_GAP_S,
    ) -> None:
        if lease_s is not None and not lease_s > 0:
            raise ValueError(f"lease_s must be > 0, got {lease_s!r}")
        if not urgent_gap_s >= 0:
            raise ValueError(f"urgent_gap_s must be >= 0, got {urgent_gap_s!r}")
        self.settings = settings
        self.owns = owns
        self.lease_s = lease_s
        self.urgent_gap_s = urgent_gap_s
        self.functions: dict[str, FunctionAutoscaler] = {}
        self._written: dict[str, float] = {}
        self._urgent: dict[str, float] = {}

    def add(
        self,
        now: float,
        function: str,
        *,
        slo_ms: float,
        percentile: float,
        model: LatencyModel,
        limit: Callable[[], int],
        container_concurrency: int,
        max_scale: int,
    ) -> None:
        """Start deciding for ``function``, whose requests' SLO is ``slo_ms`` at ``percentile``,
        served as ``model`` says with batches of up to ``limit()``."""
        self.functions[function] = function_autoscaler(
            function,
            self.settings,
            slo_ms=slo_ms,
            percentile=percentile,
            model=model,
            limit=limit,
            container_concurrency=container_concurrency,
            max_scale=max_scale,
            now=now,
            owns=self.owns,
        )

    # -- what the request path reports ---------------------------------------------------------

    def arrived(self, now: float, function: str, instances: int) -> None:
        self.functions[function].arrived(now, instances)

    def cold_start(self, now: float, function: str, seconds: float) -> None:
        """A batch waited ``seconds`` at ``now`` for a replica to start."""
        self.functions[function].cold_start(now, seconds)

    def frontends(self, now: float, function: str, count: int) -> None:
        """``count`` adapters send to ``function`` (what its replicas gossip)."""
        if count >= 1:
            self.functions[function].advisor.observe_frontends(now, count)

    def outcome(self, now: float, function: str, missed: bool, *, served: bool = True) -> None:
        """A request to ``function`` finished at ``now``, in time or ``missed`` (the evidence's
        count; a request that missed waiting for a cold start is not reported); ``served``: a
        replica answered it (a refusal at the door or a pruned request was not)."""
        auto = self.functions.get(function)
        if auto is not None:
            auto.outcome(now, missed, served=served)

    def urgent(self, now: float, function: str) -> bool:
        """Whether a miss at ``now`` asks for a decision for ``function`` at once."""
        if not self.owns or function not in self.functions:
            return False
        last = self._urgent.get(function)
        if last is not None and now - last < self.urgent_gap_s:
            return False
        self._urgent[function] = now
        return True

    # -- deciding ------------------------------------------------------------------------------

    def step(
        self, now: float, function: str, *, current: int, overdue: int = 0, busy: bool = False
    ) -> Step | None:
        """The decision for ``function`` at ``now``, with ``current`` replicas in force (the
        owned count, or the KPA's desired count under a floor) and ``overdue`` of its queued
        requests past their deadlines; ``busy``: work waits that no replica serves (an owned
        count keeps one; a platform's activator does this itself, the simulator asks here).
        None when an owned count has seen no demand yet."""
        auto = self.functions[function]
        if self.owns and auto.last_arrival is None:
            return None
        count = auto.decide(now, current, overdue=overdue)
        if self.owns:
            if busy:
                count = max(count, 1)
            every = None if self.lease_s is None else self.lease_s / 3.0
            stale = every is not None and now - self._written.get(function, -every) >= every
            return Step(count, count, count != auto.pinned or stale)
        target = count if count > 0 else None
        return Step(count, target, count != (auto.pinned or 0))

    def written(self, now: float, function: str, target: int | None) -> None:
        """The platform now holds ``target`` for ``function`` (written at ``now``)."""
        self.functions[function].pinned = target
        self._written[function] = now

    def released(self, function: str) -> None:
        """The platform holds nothing of this driver's for ``function`` any more."""
        self.functions[function].pinned = None
