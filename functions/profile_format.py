"""The batch-latency profile of one function, as written to ``functions/profiles/cpu/<kind>.json``.

Schema::

    {"kind", "threads", "device", "machine": {"cpu_model", "cores", "gpu"}, "measured_at",
     "cold_start_s": {"ready_s", "load_ms", "first_request_ms"},
     "batch_ms": {"inprocess": {"1": {"median", "p95"}, ...}, "http": {...},
                  "server_compute": {...}},
     "linear_fit": {"a_ms", "b_ms_per_item"}, "repeats"}

``ready_s`` is process spawn to a 200 from ``GET /v1/models/{name}``; ``http`` is the client's
round trip of one POST; ``server_compute`` is the ``x-compute-ms`` header of those POSTs.
``device`` is where the model computed (``cpu``, ``cuda``, ``cuda:N``; ``cpu`` when absent) and
``machine.gpu`` the GPU's name for a measurement on one. Keys
absent from a file (no HTTP run) load as empty tables or ``None``. :func:`load_profile` is what
the adapter and the simulator read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from functions.errors import FunctionsError


class ProfileFormatError(FunctionsError, ValueError):
    """A profile file that does not follow the schema; the message names the key."""


@dataclass(frozen=True)
class LatencyStat:
    median: float
    p95: float


@dataclass(frozen=True)
class Machine:
    cpu_model: str
    cores: int
    gpu: str | None = None


@dataclass(frozen=True)
class ColdStart:
    ready_s: float | None
    load_ms: float
    first_request_ms: float | None


@dataclass(frozen=True)
class LinearFit:
    a_ms: float
    b_ms_per_item: float

    def predict_ms(self, batch_size: int) -> float:
        return self.a_ms + self.b_ms_per_item * batch_size


@dataclass(frozen=True)
class Profile:
    kind: str
    threads: int
    machine: Machine
    measured_at: str
    cold_start_s: ColdStart
    inprocess: Mapping[int, LatencyStat]
    http: Mapping[int, LatencyStat]
    linear_fit: LinearFit
    server_compute: Mapping[int, LatencyStat] = field(default_factory=dict)
    repeats: int = 0
    device: str = "cpu"

    @property
    def batch_sizes(self) -> list[int]:
        return sorted(self.inprocess)

    def to_json(self) -> dict[str, Any]:
        """The JSON document for this profile."""

        def table(stats: Mapping[int, LatencyStat]) -> dict[str, dict[str, float]]:
            return {
                str(n): {"median": round(s.median, 3), "p95": round(s.p95, 3)}
                for n, s in sorted(stats.items())
            }

        cold = self.cold_start_s
        machine: dict[str, Any] = {"cpu_model": self.machine.cpu_model, "cores": self.machine.cores}
        if self.machine.gpu is not None:
            machine["gpu"] = self.machine.gpu
        return {
            "kind": self.kind,
            "threads": self.threads,
            "device": self.device,
            "machine": machine,
            "measured_at": self.measured_at,
            "repeats": self.repeats,
            "cold_start_s": {
                "ready_s": None if cold.ready_s is None else round(cold.ready_s, 3),
                "load_ms": round(cold.load_ms, 1),
                "first_request_ms": (
                    None if cold.first_request_ms is None else round(cold.first_request_ms, 3)
                ),
            },
            "batch_ms": {
                "inprocess": table(self.inprocess),
                "http": table(self.http),
                "server_compute": table(self.server_compute),
            },
            "linear_fit": {
                "a_ms": round(self.linear_fit.a_ms, 3),
                "b_ms_per_item": round(self.linear_fit.b_ms_per_item, 3),
            },
        }


def _get(doc: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(doc, Mapping) or key not in doc:
        raise ProfileFormatError(f"{where}: missing key {key!r}")
    return doc[key]


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileFormatError(f"{where}: expected a number, got {value!r}")
    return float(value)


def _optional_number(value: Any, where: str) -> float | None:
    return None if value is None else _number(value, where)


def _table(doc: Any, where: str) -> dict[int, LatencyStat]:
    if not isinstance(doc, Mapping):
        raise ProfileFormatError(f"{where}: expected an object, got {doc!r}")
    stats = {}
    for key, value in doc.items():
        try:
            size = int(key)
        except ValueError:
            raise ProfileFormatError(f"{where}: batch size {key!r} is not an integer") from None
        stats[size] = LatencyStat(
            median=_number(_get(value, "median", f"{where}.{key}"), f"{where}.{key}.median"),
            p95=_number(_get(value, "p95", f"{where}.{key}"), f"{where}.{key}.p95"),
        )
    return stats


def profile_from_json(doc: Mapping[str, Any]) -> Profile:
    """Build a :class:`Profile` from its JSON document, checking every key."""
    machine = _get(doc, "machine", "profile")
    cold = _get(doc, "cold_start_s", "profile")
    batch = _get(doc, "batch_ms", "profile")
    fit = _get(doc, "linear_fit", "profile")
    return Profile(
        kind=str(_get(doc, "kind", "profile")),
        threads=int(_number(_get(doc, "threads", "profile"), "threads")),
        machine=Machine(
            cpu_model=str(_get(machine, "cpu_model", "machine")),
            cores=int(_number(_get(machine, "cores", "machine"), "machine.cores")),
            gpu=None if machine.get("gpu") is None else str(machine["gpu"]),
        ),
        measured_at=str(_get(doc, "measured_at", "profile")),
        cold_start_s=ColdStart(
            ready_s=_optional_number(cold.get("ready_s"), "cold_start_s.ready_s"),
            load_ms=_number(_get(cold, "load_ms", "cold_start_s"), "cold_start_s.load_ms"),
            first_request_ms=_optional_number(
                cold.get("first_request_ms"), "cold_start_s.first_request_ms"
            ),
        ),
        inprocess=_table(_get(batch, "inprocess", "batch_ms"), "batch_ms.inprocess"),
        http=_table(batch.get("http", {}), "batch_ms.http"),
        server_compute=_table(batch.get("server_compute", {}), "batch_ms.server_compute"),
        linear_fit=LinearFit(
            a_ms=_number(_get(fit, "a_ms", "linear_fit"), "linear_fit.a_ms"),
            b_ms_per_item=_number(
                _get(fit, "b_ms_per_item", "linear_fit"), "linear_fit.b_ms_per_item"
            ),
        ),
        repeats=int(_number(doc.get("repeats", 0), "repeats")),
        device=str(doc.get("device", "cpu")),
    )


def load_profile(path: str | Path | Traversable) -> Profile:
    """Read and check one ``functions/profiles/cpu/<kind>.json``."""
    try:
        source = Path(path) if isinstance(path, str) else path
        doc = json.loads(source.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ProfileFormatError(f"{path}: not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise ProfileFormatError(f"{path}: expected a JSON object")
    try:
        return profile_from_json(doc)
    except ProfileFormatError as exc:
        raise ProfileFormatError(f"{path}: {exc}") from None
