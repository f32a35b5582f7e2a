"""What the platform tells its users: replica counts, events, and the cost ledger."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReplicaCounts:
    """A function's replicas right now."""

    ready: int
    starting: int
    draining: int
    desired: int
    min_scale: int


@dataclass(frozen=True)
class PlatformEvent:
    """Something that happened to a function's replicas.

    ``kind`` is one of ``cold_start`` (a replica became ready; ``duration_s`` is the cold start),
    ``start_failed``, ``replica_died``, ``scale`` (desired count changed; ``value`` is the new
    count) and ``stopped``. ``time`` is the platform clock, ``wall`` epoch seconds.
    """

    seq: int
    time: float
    wall: float
    function: str
    kind: str
    replica: str = ""
    value: float = 0.0
    duration_s: float = 0.0
    detail: str = ""


@dataclass
class Ledger:
    """Cost and cold-start accounting for one function (MLProxy's cost: containers × time)."""

    closed_replica_s: float = 0.0
    cold_starts: list[float] = field(default_factory=list)
    failed_starts: int = 0
    deaths: int = 0
    requests: int = 0
    errors: int = 0

    def summary(self, open_replica_s: float) -> dict[str, float | int]:
        starts = sorted(self.cold_starts)
        return {
            "replica_seconds": round(self.closed_replica_s + open_replica_s, 3),
            "cold_starts": len(starts),
            "cold_start_mean_s": round(sum(starts) / len(starts), 3) if starts else 0.0,
            "cold_start_max_s": round(starts[-1], 3) if starts else 0.0,
            "failed_starts": self.failed_starts,
            "replica_deaths": self.deaths,
            "requests": self.requests,
            "errors": self.errors,
        }
