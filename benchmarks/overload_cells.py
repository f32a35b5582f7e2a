"""The overload benchmark's measurements: one loadgen run, one cell, the capacity search.

``benchmarks/overload.py`` drives these against an :class:`overload_setup.Adapter`.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
from capacity_search import CapacitySearch
from overload_setup import CLIENT_TIMEOUT_S, LOADGEN, PY, ROOT, Adapter, Layout, Workload, taskset

#: the capacity search: a closed-loop estimate, then open-loop probes (keep-alive clients)
CLOSED_LOOP_CLIENTS = 32
CLOSED_LOOP_WARMUP_S = 1.0
CLOSED_LOOP_S = 4.0
PROBE_WARMUP_S = 1.5
#: the longest the search waits for what the closed loop started to be ready
SETTLE_MAX_S = 60.0
#: an open-loop run at the closed loop's rate before the probes, not judged
WARMUP_S = 10.0
#: a probe's measured seconds: enough for PROBE_REQUESTS requests (a 99 % share means little
#: over fewer), within these bounds
PROBE_REQUESTS = 100
PROBE_MIN_S = 5.0
PROBE_MAX_S = 12.0
#: the share of a probe's requests that must be answered 200 within the SLO for it to pass
PROBE_PASS = 0.99


def _busy_s() -> list[float]:
    """Each CPU's busy seconds so far, whoever ran on it (the machine may be shared)."""
    return [
        t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
        for t in psutil.cpu_times(percpu=True)
    ]


def _steal_s() -> list[float]:
    """Each CPU's seconds stolen so far: time the host ran someone else while this guest's CPU
    had work (Linux's ``steal``; 0 where it is not counted). Not busy and not idle: on a VM
    whose host is shared, a stall that no process here caused shows up only here."""
    return [getattr(t, "steal", 0.0) for t in psutil.cpu_times(percpu=True)]


@dataclass(frozen=True)
class Counters:
    """What the window is the difference of: the adapter's and its replicas' CPU seconds (the
    replicas by pid), every CPU's busy seconds and the seconds the host stole from each."""

    at: float
    adapter_s: float
    replicas_s: dict[int, float]
    busy_s: list[float]
    steal_s: list[float]

    @staticmethod
    def read(adapter: Adapter | None) -> Counters:
        replicas = adapter.replicas_cpu_s() if adapter else {}
        cpu = adapter.cpu_s() if adapter else 0.0
        return Counters(time.monotonic(), cpu, replicas, _busy_s(), _steal_s())


@dataclass(frozen=True)
class Window:
    """Loadgen's measured seconds, from its ``measuring`` line to its exit (when every measured
    request has been answered, refused or timed out), and the CPU spent in them."""

    began: float  # time.monotonic()
    seconds: float
    cpu_s: float  # the adapter process's own
    replicas_cpu_s: float
    busy: list[float]  # each CPU's busy share, whoever ran on it
    steal: list[float]  # each CPU's share stolen by the host

    @staticmethod
    def between(start: Counters, end: Counters) -> Window:
        seconds = max(end.at - start.at, 1e-9)
        replicas = sum(s - start.replicas_s.get(pid, 0.0) for pid, s in end.replicas_s.items())
        busy = [(b - a) / seconds for a, b in zip(start.busy_s, end.busy_s, strict=True)]
        steal = [(b - a) / seconds for a, b in zip(start.steal_s, end.steal_s, strict=True)]
        cpu_s = end.adapter_s - start.adapter_s
        return Window(start.at, seconds, cpu_s, replicas, busy, steal)


def loadgen(
    workload: Workload, layout: Layout, flags: list[str], adapter: Adapter | None = None
) -> tuple[dict[str, Any], Window]:
    """One run of ``benchmarks/loadgen.py`` on the generator's CPU: its JSON line, and the CPU
    spent over its measured window."""
    command = [*taskset(layout.generator), PY, LOADGEN, "--url", workload.predict_url()]
    command += ["--model", workload.sample_model, "--timeout-s", f"{CLIENT_TIMEOUT_S:g}", *flags]
    gen = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert gen.stdout is not None
    start = Counters.read(adapter)
    lines: list[str] = []
    for line in gen.stdout:
        if line.strip() == "measuring":
            start = Counters.read(adapter)
        else:
            lines.append(line)
    if adapter is not None:
        adapter.check()
    window = Window.between(start, Counters.read(adapter))
    if gen.wait() != 0 or not lines:
        raise SystemExit(f"overload: loadgen failed ({gen.returncode}): {' '.join(command)}")
    return dict(json.loads(lines[-1])), window


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q / 100.0 * len(ordered)) - 1)]


class Watch(threading.Thread):
    """Polls the status route on both ports every 50 ms and samples the adapter's RSS, and the
    door's own count of the admitted requests that finished and of those that finished late
    (the function status's ``door``: the adapter's view, from when it read each request)."""

    def __init__(self, workload: Workload, adapter: Adapter) -> None:
        super().__init__(daemon=True)
        self.urls = workload.status_urls()
        self.adapter = adapter
        #: (when, ms) per port; a failed poll counts as the client's timeout
        self.status: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
        self.rss: list[tuple[float, float]] = []
        #: (when, admitted finished, admitted late, refusals judged, those with a slot free,
        #: admitted late by their batch's service alone) as the door counts them
        self.door: list[tuple[float, int, int, int, int, int]] = []
        #: (when, replicas ready, replicas desired, batch limit, door margin ms) of the polled
        #: function
        self.state: list[tuple[float, int, int, int, float]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=CLIENT_TIMEOUT_S, trust_env=False) as client:
            while not self.halt.is_set():
                for url, out in zip(self.urls, self.status, strict=True):
                    sent = time.perf_counter()
                    try:
                        answer = client.get(url)
                        ms = (time.perf_counter() - sent) * 1000.0
                        self._door(answer)
                    except httpx.HTTPError:
                        ms = CLIENT_TIMEOUT_S * 1000.0
                    out.append((time.monotonic(), ms))
                with contextlib.suppress(psutil.Error):  # gone: Adapter.check says so
                    self.rss.append((time.monotonic(), self.adapter.rss_mb()))
                self.halt.wait(0.05)

    def _door(self, answer: httpx.Response) -> None:
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            doc = answer.json()
            margin = float((doc.get("door") or {}).get("margin_ms") or 0.0)
            ready, desired = int(doc["replicas"]["ready"]), int(doc["replicas"]["desired"])
            limit = int(doc["aimd_limit"] or 0)
            self.state.append((time.monotonic(), ready, desired, limit, margin))
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            door = answer.json()["door"]
            counts = int(door["admitted_finished"]), int(door["admitted_late"])
            refused = int(door.get("refused") or 0), int(door.get("refused_with_free_slot") or 0)
            overran = int(door.get("admitted_overran") or 0)
            self.door.append((time.monotonic(), *counts, *refused, overran))

    def door_counts(self, since: float) -> tuple[int, ...] | None:
        """Admitted requests the door saw finish, and finish late, the refusals its rule made,
        and made with a slot free, and the admitted late by their batch's service alone, from
        ``since`` to the last poll (None without a ``door`` in the status: a door that does not
        judge)."""
        before = [d for d in self.door if d[0] <= since]
        if not before or not self.door:
            return None
        last, first = self.door[-1], before[-1]
        return tuple(b - a for a, b in zip(first[1:], last[1:], strict=True))

    def p99(self, port: int, since: float, until: float) -> float | None:
        return percentile([ms for t, ms in self.status[port] if since <= t <= until], 99)

    def spans(self, since: float, until: float) -> dict[str, list[float] | None]:
        """The least and most of the replicas ready and desired, the batch limit and the door's
        margin among the polls from ``since`` to ``until`` (None where no poll said)."""
        polls = [s for s in self.state if since <= s[0] <= until]
        out: dict[str, list[float] | None] = {}
        keys = ("replicas_ready", "replicas_desired", "batch_limit", "door_margin_ms")
        for i, key in enumerate(keys, start=1):
            values = [p[i] for p in polls]
            out[key] = [min(values), max(values)] if values else None
        return out


def cell(
    workload: Workload,
    layout: Layout,
    adapter: Adapter,
    rate: float,
    fresh: bool,
    timing: dict[str, float],
) -> dict[str, Any]:
    """One open-loop load at ``rate``, then ``after_s`` idle: loadgen's result, the adapter's
    CPU over the measured window, its RSS (idle, peak, after) and the status routes' P99."""
    idle = adapter.rss_mb()
    watch = Watch(workload, adapter)
    watch.start()
    flags = ["--rate", f"{rate:.2f}", "--warmup-s", f"{timing['warmup_s']:g}"]
    flags += ["--duration-s", f"{timing['duration_s']:g}", "--slo-ms", f"{workload.slo_ms:g}"]
    began = time.monotonic()
    result, window = loadgen(
        workload, layout, [*flags, *(["--fresh-connections"] * fresh)], adapter
    )
    ended = window.began + window.seconds
    time.sleep(timing["after_s"])
    watch.halt.set()
    watch.join()
    during = [mb for t, mb in watch.rss if began <= t <= ended]
    door = watch.door_counts(window.began)
    after = [mb for t, mb in watch.rss if t > ended]
    result.update(
        window_s=round(window.seconds, 3),
        adapter_cpu_s=round(window.cpu_s, 4),
        adapter_cores=round(window.cpu_s / window.seconds, 3),
        replicas_cpu_s=round(window.replicas_cpu_s, 4),
        replica_cores=round(window.replicas_cpu_s / window.seconds, 3),
        # how busy each CPU was (the adapter's and the generator's), whoever ran on it
        cpus_busy={str(c): round(b, 3) for c, b in enumerate(window.busy)},
        # and how much of each the host stole (a stall no process here caused)
        cpus_steal={str(c): round(b, 3) for c, b in enumerate(window.steal)},
        rss_idle_mb=round(idle, 1),
        rss_peak_mb=round(max(during, default=idle), 1),
        rss_after_mb=round(after[-1] if after else idle, 1),
        status_p99_ms=_round(watch.p99(0, window.began, ended)),
        probe_status_p99_ms=_round(watch.p99(1, window.began, ended)),
        # the adapter's own count, from the measured window's start to the idle after it: what
        # it admitted finishing late (given up included) as it sees them, from when it read each
        door_finished=None if door is None else door[0],
        door_late=None if door is None else door[1],
        # the refusals the door's rule made for the queue ahead (a held refusal repeats one),
        # and those made while a replica's slot was free: priced by the batch it would ride
        door_refused=None if door is None else door[2],
        door_refused_free_slot=None if door is None else door[3],
        # of door_late, those late even had they not waited (their batch's service alone)
        door_overran=None if door is None else door[4],
        # the function's state over the measured window (least, most): a replica starting
        # (ready under desired), a count scaled down, or a batch limit still growing explains
        # a cell's goodput
        **watch.spans(window.began, ended),
    )
    return result


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def probe_s(rate: float) -> float:
    """A probe's measured seconds at ``rate``."""
    return min(PROBE_MAX_S, max(PROBE_MIN_S, PROBE_REQUESTS / rate))


def settle(workload: Workload, limit_s: float = SETTLE_MAX_S) -> float:
    """Wait until every function of ``workload`` has the replicas it wants ready and nothing
    queued or in flight (what the closed loop's flood started and queued), at most ``limit_s``;
    the seconds waited. A chain's closed loop scales its stages out, and the new replicas load
    their models on the cores the serving ones use for seconds: probes in that time failed at
    1 req/s and held the capacity search there."""
    began = time.monotonic()
    with httpx.Client(base_url=workload.base(), timeout=5.0, trust_env=False) as client:
        while time.monotonic() - began < limit_s:
            time.sleep(1.0)
            docs = [client.get(f"/v1/models/{fn}").json() for fn in workload.functions()]
            if all(d["replicas"]["ready"] >= d["replicas"]["desired"] and d["queue"] == 0
                   and d["inflight_batches"] == 0 for d in docs):  # fmt: skip
                break
    return round(time.monotonic() - began, 1)


def _probe(
    workload: Workload, layout: Layout, adapter: Adapter, rate: float
) -> tuple[bool, dict[str, Any]]:
    """One capacity probe at ``rate``: whether it passed, and its record. The status routes
    are polled as in a cell (:class:`Watch`), so a probe and a cell load the adapter alike."""
    seconds = probe_s(rate)
    flags = ["--rate", f"{rate:.2f}", "--warmup-s", f"{PROBE_WARMUP_S:g}"]
    flags += ["--duration-s", f"{seconds:.1f}", "--slo-ms", f"{workload.slo_ms:g}"]
    watch = Watch(workload, adapter)
    watch.start()
    out, window = loadgen(workload, layout, flags, adapter)
    watch.halt.set()
    watch.join()
    scheduled = int(out["requests"]) + int(out["client_dropped"])
    share = int(out["ok_within_slo"]) / scheduled if scheduled else 0.0
    ok = share >= PROBE_PASS
    return ok, (
        {
            "rate": round(rate, 2),
            "within_slo_share": round(share, 4),
            "passed": ok,
            "goodput_rps": out["goodput_rps"],
            "refused": out["refused"],
            # why the refused were (the generator's six most common answers, digits as N): a
            # probe failed by the door reads differently from one failed by the read budget
            "reasons": out.get("reasons") or {},
            "timeouts": out["timeouts"],
            "p99_ms": out["p99_ms"],
            "ok": out["ok"],
            "window_s": round(window.seconds, 3),
            "adapter_cpu_s": round(window.cpu_s, 4),
            "cpus_steal": {str(c): round(b, 3) for c, b in enumerate(window.steal)},
            **watch.spans(window.began, window.began + window.seconds),
        }
    )


def capacity(workload: Workload, layout: Layout, adapter: Adapter) -> dict[str, Any]:
    """The largest rate at which >= 99 % of the requests sent are answered 200 within the SLO,
    open loop, keep-alive: a closed-loop estimate, a warm-up open loop at that rate (not
    judged), then probes from it as :class:`capacity_search.CapacitySearch` steers them (every
    failure run again once before it counts)."""
    flags = ["--concurrency", str(CLOSED_LOOP_CLIENTS), "--warmup-s", f"{CLOSED_LOOP_WARMUP_S:g}"]
    closed, _ = loadgen(workload, layout, [*flags, "--duration-s", f"{CLOSED_LOOP_S:g}"], adapter)
    settled_s = settle(workload)
    rate = max(1.0, float(closed["ok_rps"]))
    # a warm-up at that rate, open loop, not judged: what the closed loop's flood taught the
    # door (a margin learnt from its late finishes fades with a 10 s half-life) settles first
    flags = ["--rate", f"{rate:.2f}", "--warmup-s", "0", "--duration-s", f"{WARMUP_S:g}"]
    warmup, _ = loadgen(workload, layout, [*flags, "--slo-ms", f"{workload.slo_ms:g}"], adapter)
    time.sleep(1.0)
    search = CapacitySearch(rate)
    probes: list[dict[str, Any]] = []
    while search.more():
        confirming = search.confirming
        ok, record = _probe(workload, layout, adapter, search.rate)
        probes.append({**record, "confirms": confirming})
        search.record(ok)
        time.sleep(1.0)  # what a failed probe left queued drains
    passed, failed = search.passed, search.failed
    best = passed if passed is not None else max(float(p["goodput_rps"] or 0.0) for p in probes)
    return {
        "closed_loop_rps": closed["ok_rps"],
        "settled_s": settled_s,
        "warmup": {k: warmup.get(k) for k in ("rate", "goodput_rps", "refused", "ok", "p99_ms")},
        "probes": probes,
        "capacity_rps": round(best, 1),
        # False: no probe passed (the capacity is then the best goodput a probe saw)
        "found": passed is not None,
        # False: no probe failed (the capacity is then a lower bound)
        "bracketed": failed is not None,
    }
