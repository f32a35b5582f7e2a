"""What the Locust users send, read from Locust's parsed options (``loadtests/locustfile.py``
registers them; see its docstring): the trace, the path, the bodies and the SLO an answer must
meet. Plain Python, without Locust (which monkey-patches the standard library on import), so the
rules are tested in process."""

from __future__ import annotations

import json
import math
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traces import Trace, hold, load_trace, resolve_trace, scale_to_peak

__all__ = ["Recorder", "Settings", "adapter_slo_ms", "settings_from", "users_at", "verdict"]

#: distinct sample bodies drawn from a model (cycled over the requests)
SAMPLE_BODIES = 64


@dataclass(frozen=True)
class Settings:
    """What the options ask for."""

    trace: Trace
    path: str
    bodies: tuple[bytes, ...]
    #: answers slower than this (ms) are failures; None: no SLO check
    slo_ms: float | None
    #: where each answer is recorded as the replayer records them (None: not recorded)
    records: Path | None = None


def _number(options: Any, name: str, default: float | None) -> float | None:
    text = str(getattr(options, name, "") or "").strip()
    if not text:
        return default
    flag = "--" + name.replace("_", "-")
    try:
        value = float(text)
    except ValueError:
        raise SystemExit(f"{flag}={text!r}: not a number") from None
    if not math.isfinite(value) or value < 0:
        raise SystemExit(f"{flag}={text!r}: must be a non-negative number")
    return value


def _target(options: Any) -> tuple[str, str]:
    """(predict path, status path) of the function or app the options name."""
    function, app = options.slackwise_function, options.slackwise_app
    if function and app:
        raise SystemExit("give --slackwise-function or --slackwise-app, not both")
    if app:
        return f"/v1/apps/{app}:predict", f"/v1/apps/{app}"
    if function:
        return f"/v1/models/{function}:predict", f"/v1/models/{function}"
    raise SystemExit("give --slackwise-function or --slackwise-app")


def _bodies(options: Any) -> tuple[bytes, ...]:
    if options.slackwise_body_file:
        try:
            return (Path(options.slackwise_body_file).read_bytes(),)
        except OSError as exc:
            raise SystemExit(f"--slackwise-body-file: {exc}") from None
    if options.slackwise_model:
        from functions.registry import create_model

        instances = create_model(options.slackwise_model).sample_instances(SAMPLE_BODIES)
        return tuple(json.dumps({"instances": [x]}).encode() for x in instances)
    raise SystemExit("give --slackwise-model or --slackwise-body-file")


def adapter_slo_ms(host: str, status_path: str) -> float | None:
    """The SLO the adapter serves the target with (its status route's ``slo_ms``), or None when
    the host says none (not an adapter, or no such route)."""
    try:
        with urllib.request.urlopen(host.rstrip("/") + status_path, timeout=5) as answer:
            slo = json.loads(answer.read()).get("slo_ms")
    except (OSError, ValueError, AttributeError):
        return None
    return float(slo) if isinstance(slo, int | float) and slo > 0 else None


def settings_from(options: Any, host: str | None) -> Settings:
    """The settings Locust's parsed options ask for (SystemExit names a bad one)."""
    if not options.slackwise_trace:
        raise SystemExit("give --slackwise-trace: a trace file, or nasa / twitter")
    try:
        trace = load_trace(
            resolve_trace(options.slackwise_trace),
            start_s=_number(options, "slackwise_start_s", 0.0) or 0.0,
            duration_s=_number(options, "slackwise_duration_s", None),
        )
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--slackwise-trace={options.slackwise_trace!r}: {exc}") from None
    max_rps = _number(options, "slackwise_max_rps", None)
    if max_rps is not None:
        trace = scale_to_peak(trace, max_rps)
    trace = hold(trace, _number(options, "slackwise_step_s", 1.0) or 1.0)
    path, status = _target(options)
    slo = _number(options, "slackwise_slo_ms", None)
    if slo is None and host:
        slo = adapter_slo_ms(host, status)
    records = getattr(options, "slackwise_records", "") or None
    return Settings(trace, path, _bodies(options), slo, None if records is None else Path(records))


class Recorder:
    """Each answer as a line of ``slackwise replay --records``'s JSONL (``sent``: seconds from
    the start, ``latency``: seconds, ``status``), so ``slackwise plot`` windows Locust's run
    per request as it does the replayer's: Locust's own CSV keeps percentiles, not requests."""

    def __init__(self, path: Path, start: float) -> None:
        self.start = start
        self._file = path.open("w", encoding="utf-8", buffering=1)  # a line at a time

    def record(self, sent: float, latency_s: float, status: int) -> None:
        row = {
            "sent": round(sent - self.start, 6),
            "latency": round(latency_s, 6),
            "status": status,
        }
        self._file.write(json.dumps(row) + "\n")

    def close(self) -> None:
        self._file.close()


def users_at(trace: Trace, t_s: float, current_users: int) -> tuple[int, float] | None:
    """(users, spawn rate) ``t_s`` into ``trace``, or None when it is over.

    One user per request per second of rate (each user sends at most once a second); the spawn
    rate reaches the new count within a second.
    """
    rate = trace.rate_at(t_s)
    if rate is None:
        return None
    users = max(0, round(rate))
    return users, float(max(1, abs(users - current_users)))


def verdict(status: int, elapsed_ms: float, slo_ms: float | None) -> str | None:
    """Why an answer is a failure (a status other than 200, or slower than the SLO); None when
    it is a success."""
    if status != 200:
        return f"HTTP {status}"
    if slo_ms is not None and elapsed_ms > slo_ms:
        return f"over the SLO ({slo_ms:g} ms)"
    return None
