"""Locust driving a trace: ``locust -f loadtests/locustfile.py --host URL``.

Locust is closed-loop: each user waits for its answer before sending again, so when the server
slows the offered rate drops with it and queueing stays hidden. The users here follow a trace
(users ≈ the trace's rate, each sending at most one request per second), which is convenient for
watching a deployment in Locust's UI, but SLO measurements are made with the open-loop replayer
(``slackwise replay``), whose requests leave on schedule whatever the answers do.

Configured by environment variables, read when Locust creates the shape and the users:

* ``SLACKWISE_TRACE``: a trace file or ``nasa`` / ``twitter`` (required)
* ``SLACKWISE_MAX_RPS``: scale the trace so its peak is this rate (default: as recorded)
* ``SLACKWISE_STEP_S``: seconds each trace step is held (default 1)
* ``SLACKWISE_START_S`` / ``SLACKWISE_DURATION_S``: the window of the trace (default: all of it)
* ``SLACKWISE_FUNCTION`` or ``SLACKWISE_APP``: POST ``/v1/models/NAME:predict`` or
  ``/v1/apps/NAME:predict`` on ``--host``
* ``SLACKWISE_MODEL`` (bodies from the model's real samples) or ``SLACKWISE_BODY_FILE``

Locust monkey-patches the standard library when imported, so nothing else in the project imports
this file.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from locust import HttpUser, LoadTestShape, constant_throughput, task

from traces import Trace, hold, load_trace, resolve_trace, scale_to_peak

#: distinct sample bodies drawn from a model (cycled over the requests)
SAMPLE_BODIES = 64


@dataclass(frozen=True)
class Settings:
    """What the environment asks for."""

    trace: Trace
    path: str
    bodies: tuple[bytes, ...]


def _float(name: str, default: float | None) -> float | None:
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        raise SystemExit(f"{name}={text!r}: not a number") from None
    if not math.isfinite(value) or value < 0:
        raise SystemExit(f"{name}={text!r}: must be a non-negative number")
    return value


def _path() -> str:
    function = os.environ.get("SLACKWISE_FUNCTION")
    app = os.environ.get("SLACKWISE_APP")
    if function and app:
        raise SystemExit("set SLACKWISE_FUNCTION or SLACKWISE_APP, not both")
    if app:
        return f"/v1/apps/{app}:predict"
    if function:
        return f"/v1/models/{function}:predict"
    raise SystemExit("set SLACKWISE_FUNCTION or SLACKWISE_APP")


def _bodies() -> tuple[bytes, ...]:
    body_file = os.environ.get("SLACKWISE_BODY_FILE")
    model = os.environ.get("SLACKWISE_MODEL")
    if body_file:
        return (Path(body_file).read_bytes(),)
    if model:
        from functions.registry import create_model

        instances = create_model(model).sample_instances(SAMPLE_BODIES)
        return tuple(json.dumps({"instances": [x]}).encode() for x in instances)
    raise SystemExit("set SLACKWISE_MODEL or SLACKWISE_BODY_FILE")


@functools.cache
def settings() -> Settings:
    """The environment's settings, read once."""
    name = os.environ.get("SLACKWISE_TRACE")
    if not name:
        raise SystemExit("set SLACKWISE_TRACE to a trace file or nasa / twitter")
    trace = load_trace(
        resolve_trace(name),
        start_s=_float("SLACKWISE_START_S", 0.0) or 0.0,
        duration_s=_float("SLACKWISE_DURATION_S", None),
    )
    max_rps = _float("SLACKWISE_MAX_RPS", None)
    if max_rps is not None:
        trace = scale_to_peak(trace, max_rps)
    trace = hold(trace, _float("SLACKWISE_STEP_S", 1.0) or 1.0)
    return Settings(trace, _path(), _bodies())


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


class TraceShape(LoadTestShape):
    """Users follow the trace's rate; the test stops when the trace ends."""

    def tick(self) -> tuple[int, float] | None:
        current = self.runner.user_count if self.runner is not None else 0
        run_time_s: float = self.get_run_time()  # type: ignore[no-untyped-call]  # locust: untyped
        return users_at(settings().trace, run_time_s, current)


class PredictUser(HttpUser):
    """POSTs V1 predict requests, at most one per second, waiting for each answer."""

    wait_time = constant_throughput(1.0)
    _sent = 0

    @task
    def predict(self) -> None:
        config = settings()
        body = config.bodies[self._sent % len(config.bodies)]
        self._sent += 1
        self.client.post(config.path, data=body, headers={"content-type": "application/json"})
