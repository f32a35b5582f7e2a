"""How many replicas each simulated function has: a pluggable scaler.

The engine asks a :class:`Scaler` and executes its answers, as ``knative.local.platform`` executes
the
KPA's: it feeds it the platform's metric once a second (:meth:`Scaler.observe`), asks for a
replica count every ``tick_s`` (:meth:`Scaler.decide`), pokes it when a batch arrives at a
function with no replica (:meth:`Scaler.wake`, Knative's activator), starts replicas that become
ready after the function's cold start and removes surplus ones (starting ones first, newest
first). ``tick_s = None`` means the fleet never changes after :meth:`Scaler.initial`.

Two scalers ship: :class:`FixedScaler` (GrandSLAM's fixed capacity: ``nodes`` warm replicas per
function from time 0) and :class:`KpaScaler` (``knative.kpa.KPA`` per function, ticked like the
local platform). Others (per-function advisors, pinned minimums) implement the same protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from knative.kpa import KPA
from slackwise_core.knative_scaling import ScalingSpec
from slackwise_policies.latency import LatencyModel

__all__ = ["FixedScaler", "FunctionState", "KpaScaler", "Scaler", "ScalerHooks"]


@dataclass(frozen=True, slots=True)
class FunctionState:
    """What a scaler may read about one function when it decides."""

    ready: int
    starting: int
    inflight: int
    queued: int
    #: queued past their deadline, not waiting for a cold start (evidence of a stall)
    overdue: int = 0


class Scaler(Protocol):
    """Decides the replica count of every function (see the module docstring)."""

    @property
    def tick_s(self) -> float | None: ...

    def initial(self, function: str) -> int:
        """Replicas that are ready (warm) at time 0."""
        ...

    def observe(self, now: float, function: str, concurrency: float, rps: float) -> None:
        """The function's mean in-flight batches and batch rate over the last second."""
        ...

    def wake(self, now: float, function: str, inflight: int) -> None:
        """A batch reached ``function`` while it had no replica (scale from zero)."""
        ...

    def decide(self, now: float, function: str, state: FunctionState) -> int:
        """The replica count wanted at ``now``."""
        ...


@runtime_checkable
class ScalerHooks(Protocol):
    """What a scaler that learns from the request path (as the live advisor does) also gets.

    The engine calls these only on scalers that have all four: :meth:`bind` once per function
    before the run (the function's latency model, which learns from every finished batch, and
    the batch limit in use), :meth:`arrived` for every request entering the function,
    :meth:`cold_start` with how long each batch that met no ready replica waited for one, and
    :meth:`missed` when a request through the function finished late or was refused as late
    (True asks for a decision now, as Swayam's Algorithm 1 re-evaluates on a violation), and
    :meth:`outcome` for every request that did not wait for a cold start, in time or missed (the
    evidence the count answers to).
    """

    def bind(self, function: str, model: LatencyModel, limit: Callable[[], int]) -> None: ...

    def arrived(self, now: float, function: str, count: int) -> None: ...

    def cold_start(self, now: float, function: str, seconds: float) -> None: ...

    def missed(self, now: float, function: str) -> bool: ...

    def outcome(self, now: float, function: str, missed: bool, *, served: bool = True) -> None: ...


class FixedScaler:
    """``nodes[function]`` warm replicas for the whole run; never ticks."""

    def __init__(self, nodes: Mapping[str, int]) -> None:
        self._nodes = dict(nodes)

    @property
    def tick_s(self) -> float | None:
        return None

    def initial(self, function: str) -> int:
        return self._nodes[function]

    def observe(self, now: float, function: str, concurrency: float, rps: float) -> None:
        return None

    def wake(self, now: float, function: str, inflight: int) -> None:
        return None

    def decide(self, now: float, function: str, state: FunctionState) -> int:
        return self._nodes[function]


class KpaScaler:
    """One :class:`knative.kpa.KPA` per function, as ``knative.local.platform`` runs them.

    The metric is what the platform sees: the adapter's in-flight batches (concurrency) or their
    rate (rps), by each function's ``metric``. ``pinned`` holds min-scale overrides.
    """

    def __init__(
        self,
        specs: Mapping[str, ScalingSpec],
        *,
        tick_s: float = 2.0,
        initial: Mapping[str, int] | None = None,
    ) -> None:
        self._specs = dict(specs)
        self._kpas = {name: KPA(spec) for name, spec in specs.items()}
        self._tick_s = tick_s
        self._initial = dict(initial or {})
        self.pinned: dict[str, int | None] = {name: None for name in specs}

    @property
    def tick_s(self) -> float | None:
        return self._tick_s

    def initial(self, function: str) -> int:
        """0 (Knative starts a revision cold), or the replicas pre-provisioned in ``initial``."""
        return self._initial.get(function, 0)

    def observe(self, now: float, function: str, concurrency: float, rps: float) -> None:
        metric = self._specs[function].metric
        self._kpas[function].record(now, rps if metric == "rps" else concurrency)

    def wake(self, now: float, function: str, inflight: int) -> None:
        # knative.local.platform records the in-flight count and ticks at once (the activator's
        # poke)
        self._kpas[function].record(now, float(inflight))

    def decide(self, now: float, function: str, state: FunctionState) -> int:
        decision = self._kpas[function].decide(
            now,
            ready=state.ready,
            current=state.ready + state.starting,
            min_scale=self.pinned[function],
        )
        return decision.desired
