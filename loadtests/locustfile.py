"""Locust driving a trace: ``locust -f loadtests/locustfile.py --host URL --slackwise-trace
twitter --slackwise-function embed --slackwise-model embed``.

Locust is closed-loop: each user waits for its answer before sending again, so when the server
slows the offered rate drops with it and queueing stays hidden. The users here follow a trace
(users ≈ the trace's rate, each sending at most one request per second), which is convenient for
watching a deployment in Locust's UI, but SLO measurements are made with the open-loop replayer
(``slackwise replay``), whose requests leave on schedule whatever the answers do.

Options go through Locust's own parser (``locust --help`` lists them under "Custom arguments";
each also reads the environment variable named beside it, and the web UI shows them):

* ``--slackwise-trace`` (``SLACKWISE_TRACE``): a trace file or ``nasa`` / ``twitter`` (required)
* ``--slackwise-max-rps``: scale the trace so its peak is this rate (default: as recorded)
* ``--slackwise-step-s``: seconds each trace step is held (default 1)
* ``--slackwise-start-s`` / ``--slackwise-duration-s``: the window of the trace (default: all)
* ``--slackwise-function`` or ``--slackwise-app``: POST ``/v1/models/NAME:predict`` or
  ``/v1/apps/NAME:predict`` on ``--host``
* ``--slackwise-model`` (bodies from the model's real samples) or ``--slackwise-body-file``
* ``--slackwise-slo-ms``: an answer slower than this is a Locust *failure* ("over the SLO"), as
  is any status but 200; default: the function's or app's SLO, read from the adapter's status
  route (``GET /v1/models/NAME``) when the test starts (no SLO check if it has none)
* ``--slackwise-records``: write each answer to this JSONL file as ``slackwise replay
  --records`` does, for ``slackwise plot`` to window per request (Locust's CSV history keeps
  percentiles only: cumulative ones, or over its last 10 s with ``--csv-full-history``)

Locust monkey-patches the standard library when imported, so nothing else in the project imports
this file.
"""

from __future__ import annotations

import time
from typing import Any

from locust import HttpUser, LoadTestShape, constant_throughput, events, task

from loadtests.locust_options import Recorder, Settings, settings_from, users_at, verdict

#: (option, default, help); each also reads its environment variable (``SLACKWISE_TRACE``, ...)
OPTIONS = (
    ("--slackwise-trace", "", "a trace file, or nasa / twitter (required)"),
    ("--slackwise-max-rps", "", "scale the trace so its peak is this rate"),
    ("--slackwise-step-s", "1", "seconds each trace step is held"),
    ("--slackwise-start-s", "0", "where in the trace to start (s)"),
    ("--slackwise-duration-s", "", "how much of the trace to run (s; default all)"),
    ("--slackwise-function", "", "POST /v1/models/NAME:predict"),
    ("--slackwise-app", "", "POST /v1/apps/NAME:predict"),
    ("--slackwise-model", "", "bodies from this model kind's real samples"),
    ("--slackwise-body-file", "", "one request body, sent every time"),
    ("--slackwise-slo-ms", "", "slower answers are failures (default: the adapter's SLO)"),
    ("--slackwise-records", "", "each answer to this JSONL file, for slackwise plot"),
)


def add_options(parser: Any) -> None:
    """The options, in Locust's own parser (see the module docstring)."""
    group = parser.add_argument_group("slackwise", "what the trace-driven users send")
    for flag, default, text in OPTIONS:
        env = flag[2:].upper().replace("-", "_")
        group.add_argument(flag, env_var=env, default=default, help=text)


# Locust reads a locustfile's options when it imports it: registering them is what it asks of one
events.init_command_line_parser.add_listener(add_options)  # type: ignore[no-untyped-call]


_SETTINGS: dict[int, Settings] = {}
_RECORDERS: dict[int, Recorder] = {}


def settings(environment: Any) -> Settings:
    """The run's settings, read once per Locust environment."""
    key = id(environment)
    if key not in _SETTINGS:
        _SETTINGS[key] = settings_from(environment.parsed_options, environment.host)
        if (path := _SETTINGS[key].records) is not None:
            _RECORDERS[key] = Recorder(path, time.time())
    return _SETTINGS[key]


@events.quitting.add_listener  # type: ignore[untyped-decorator]
def _close_records(environment: Any, **_: Any) -> None:
    recorder = _RECORDERS.pop(id(environment), None)
    if recorder is not None:
        recorder.close()


class TraceShape(LoadTestShape):
    """Users follow the trace's rate; the test stops when the trace ends."""

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None
        current = self.runner.user_count
        run_time_s: float = self.get_run_time()  # type: ignore[no-untyped-call]  # locust: untyped
        return users_at(settings(self.runner.environment).trace, run_time_s, current)


class PredictUser(HttpUser):
    """POSTs V1 predict requests, at most one per second, waiting for each answer; an error or
    an answer over the SLO is a Locust failure (so Locust's failure rate is the SLO miss rate)."""

    wait_time = constant_throughput(1.0)
    _sent = 0

    @task
    def predict(self) -> None:
        config = settings(self.environment)
        body = config.bodies[self._sent % len(config.bodies)]
        self._sent += 1
        sent = time.time()
        with self.client.post(
            config.path,
            data=body,
            headers={"content-type": "application/json"},
            catch_response=True,
        ) as answer:
            elapsed_s = answer.elapsed.total_seconds()
            if (recorder := _RECORDERS.get(id(self.environment))) is not None:
                recorder.record(sent, elapsed_s, answer.status_code)
            why = verdict(answer.status_code, elapsed_s * 1000.0, config.slo_ms)
            if why is None:
                answer.success()
            else:
                answer.failure(why)
