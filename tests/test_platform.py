"""The local platform with real replica processes and sockets (digits model: fast to load)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sklearn.datasets import load_digits

from knative.local.fleet import Fleet, FunctionRuntime
from knative.local.platform import LocalPlatform
from slackwise_config import Config, FunctionConfig, parse_config

pytestmark = pytest.mark.slow

DIGITS = load_digits().data[:4].tolist()
BODY = json.dumps({"instances": DIGITS}).encode()


def make_config(
    *,
    annotations: dict[str, str] | None = None,
    autoscaler: dict[str, str] | None = None,
    concurrency: int = 1,
    **platform: Any,
) -> Config:
    return parse_config(
        {
            "platform": {
                "autoscaler": {
                    "allow-zero-initial-scale": "true",
                    "initial-scale": "0",
                    **(autoscaler or {}),
                },
                **platform,
            },
            "functions": {
                "digits": {
                    "model": "digits",
                    "container_concurrency": concurrency,
                    "annotations": {
                        "autoscaling.knative.dev/target": "1",
                        "autoscaling.knative.dev/target-utilization-percentage": "100",
                        **(annotations or {}),
                    },
                }
            },
        }
    )


def run(
    config: Config, body: Callable[[LocalPlatform, httpx.AsyncClient], Awaitable[None]]
) -> None:
    async def main() -> None:
        async with (
            LocalPlatform(config) as platform,
            httpx.AsyncClient(trust_env=False, headers=platform.auth_headers()) as client,
        ):
            await body(platform, client)
        platform.close_logs()

    asyncio.run(main())


def predict_url(platform: LocalPlatform) -> str:
    return f"{platform.url('digits')}/v1/models/digits:predict"


async def post(client: httpx.AsyncClient, platform: LocalPlatform) -> httpx.Response:
    return await client.post(
        predict_url(platform),
        content=BODY,
        headers={"content-type": "application/json"},
        timeout=60,
    )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_scale_from_zero_buffers_every_request_and_reports_the_cold_start() -> None:
    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        assert platform.replicas("digits").ready == 0
        responses = await asyncio.gather(*(post(client, platform) for _ in range(12)))
        assert [r.status_code for r in responses] == [200] * 12
        for r in responses:
            labels = [p["label"] for p in r.json()["predictions"]]
            assert labels == [0, 1, 2, 3]
        # the first replica's first request is flagged cold by the function itself
        assert sum(r.headers["x-cold-start"] == "1" for r in responses) >= 1
        # requests sent at zero waited for the cold start in the activator
        assert max(float(r.headers["x-platform-wait-ms"]) for r in responses) > 200
        cold = await platform.wait_event("cold_start", "digits", timeout_s=5)
        assert cold.duration_s > 0.2
        usage = platform.usage("digits")
        assert usage["cold_starts"] >= 1
        assert usage["cold_start_mean_s"] > 0.2
        assert usage["requests"] == 12 and usage["errors"] == 0
        assert usage["replica_seconds"] > 0

    run(make_config(), body)


def test_scales_to_zero_after_the_idle_window_and_back() -> None:
    config = make_config(
        autoscaler={"stable-window": "6s", "scale-to-zero-grace-period": "6s"},
        annotations={"autoscaling.knative.dev/window": "6s"},
    )

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        assert (await post(client, platform)).status_code == 200
        started = platform.clock.now()
        assert platform.replicas("digits").ready >= 1
        stopped = await platform.wait_event("scale", "digits", timeout_s=40)
        while stopped.value != 0:
            stopped = await platform.wait_event("scale", "digits", since=stopped.seq, timeout_s=40)
        idle_s = stopped.time - started
        # stable window (6 s) of zeros plus the grace period (6 s), plus ticks on a busy machine
        assert 10.0 <= idle_s <= 30.0, idle_s
        for _ in range(200):
            if platform.replicas("digits").ready + platform.replicas("digits").draining == 0:
                break
            await asyncio.sleep(0.05)
        assert platform.replicas("digits").ready == 0
        cold_starts = platform.usage("digits")["cold_starts"]
        replica_s = platform.usage("digits")["replica_seconds"]
        await asyncio.sleep(1.0)
        assert platform.usage("digits")["replica_seconds"] == replica_s  # nothing runs at zero
        assert (await post(client, platform)).status_code == 200  # and it comes back
        assert platform.usage("digits")["cold_starts"] == cold_starts + 1

    run(config, body)


@pytest.mark.parametrize(("concurrency", "expect_overlap"), [(1, False), (0, True)])
def test_container_concurrency_is_a_hard_limit(concurrency: int, expect_overlap: bool) -> None:
    config = make_config(
        concurrency=concurrency,
        annotations={
            "autoscaling.knative.dev/min-scale": "1",
            "autoscaling.knative.dev/max-scale": "1",
        },
    )
    big = json.dumps({"instances": load_digits().data[:1000].tolist()}).encode()

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        await platform.wait_event("cold_start", "digits", timeout_s=30)
        responses = await asyncio.gather(
            *(
                client.post(predict_url(platform), content=big, timeout=60,
                            headers={"content-type": "application/json"})
                for _ in range(8)
            )
        )  # fmt: skip
        assert all(r.status_code == 200 for r in responses)
        seen = [int(r.headers["x-in-flight"]) for r in responses]
        assert (max(seen) > 1) is expect_overlap, seen

    run(config, body)


def test_buffer_overflow_and_wait_timeout_answer_503_with_a_reason() -> None:
    config = make_config(
        annotations={
            "autoscaling.knative.dev/min-scale": "1",
            "autoscaling.knative.dev/max-scale": "1",
        },
        queue_depth=1,
        request_timeout_s=1.0,
    )

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        await platform.wait_event("cold_start", "digits", timeout_s=30)
        (pid,) = platform.replica_pids("digits").values()
        os.kill(pid, signal.SIGSTOP)  # the replica holds its one slot and never answers
        try:
            held = asyncio.create_task(post(client, platform))
            await asyncio.sleep(0.3)
            queued = asyncio.create_task(post(client, platform))
            await asyncio.sleep(0.1)
            overflow = await post(client, platform)
            assert overflow.status_code == 503
            assert "buffer full" in overflow.json()["error"]
            timed_out = await queued
            assert timed_out.status_code == 503
            assert "within 1 s" in timed_out.json()["error"]
        finally:
            os.kill(pid, signal.SIGCONT)
        assert (await held).status_code == 200

    run(config, body)


def test_a_replica_killed_mid_request_fails_that_request_and_is_replaced() -> None:
    config = make_config(annotations={"autoscaling.knative.dev/min-scale": "1"})

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        await platform.wait_event("cold_start", "digits", timeout_s=30)
        (pid,) = platform.replica_pids("digits").values()
        os.kill(pid, signal.SIGSTOP)  # freeze it so the request is surely in flight
        pending = asyncio.create_task(post(client, platform))
        await asyncio.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        failed = await pending
        assert failed.status_code == 502
        assert "failed mid-request" in failed.json()["error"]
        died = await platform.wait_event("replica_died", "digits", timeout_s=10)
        replaced = await platform.wait_event("cold_start", "digits", since=died.seq, timeout_s=30)
        assert replaced.replica != died.replica
        assert (await post(client, platform)).status_code == 200
        assert platform.usage("digits")["replica_deaths"] == 1

    run(config, body)


def test_pinning_min_scale_through_the_admin_api() -> None:
    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        base = platform.url("digits")
        bad = await client.put(f"{base}/platform/functions/digits/min-scale", json={"x": 1})
        assert bad.status_code == 400 and "min_scale" in bad.json()["error"]
        negative = await client.put(
            f"{base}/platform/functions/digits/min-scale", json={"min_scale": -1}
        )
        assert negative.status_code == 400 and "-1" in negative.json()["error"]
        missing = await client.put(f"{base}/platform/functions/nope/min-scale", json={})
        assert missing.status_code == 404
        pinned = await client.put(
            f"{base}/platform/functions/digits/min-scale", json={"min_scale": 2}
        )
        assert pinned.status_code == 200
        assert pinned.json()["replicas"]["desired"] == 2
        for _ in range(600):
            if platform.replicas("digits").ready == 2:
                break
            await asyncio.sleep(0.05)
        assert platform.replicas("digits").ready == 2
        listing = (await client.get(f"{base}/platform/functions")).json()
        assert listing["functions"][0]["usage"]["cold_starts"] == 2
        events = (await client.get(f"{base}/platform/events")).json()["events"]
        assert [e["kind"] for e in events].count("cold_start") == 2
        assert (await client.get(f"{base}/v1/models/nope")).status_code == 404

    run(make_config(), body)


def test_cores_through_the_admin_api_are_a_quota_on_the_replicas() -> None:
    from knative.local.cpu_quota import detect

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        base = platform.url("digits")
        where = f"{base}/platform/functions/digits/cores"
        assert (await client.put(where, json={"cores": "two"})).status_code == 400
        assert (await client.put(where, json={"cores": -1})).status_code == 400
        assert (await client.put(where, json={})).status_code == 400
        assert (await client.put(f"{base}/platform/functions/nope/cores",
                                 json={"cores": 1})).status_code == 404  # fmt: skip
        await client.put(f"{base}/platform/functions/digits/min-scale", json={"min_scale": 1})
        for _ in range(600):
            if platform.replicas("digits").ready == 1:
                break
            await asyncio.sleep(0.05)
        set_ = await client.put(where, json={"cores": 0.5})
        assert set_.status_code == 200 and set_.json()["cores"] == 0.5
        (pid,) = platform.replica_pids("digits").values()
        groups = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8")
        if detect() is not None:  # a real cgroup: the replica is in it
            assert f"slackwise/digits-{os.getpid()}" in groups
        assert (await client.post(f"{base}/v1/models/digits:predict", content=BODY)).is_success
        lifted = await client.put(where, json={"cores": None})
        assert lifted.json()["cores"] is None

    run(make_config(), body)


def test_an_owned_count_overrides_the_kpa_until_it_is_handed_back() -> None:
    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        base = platform.url("digits")
        bad = await client.put(f"{base}/platform/functions/digits/scale", json={"replicas": -2})
        assert bad.status_code == 400 and "-2" in bad.json()["error"]
        owned = await client.put(f"{base}/platform/functions/digits/scale", json={"replicas": 2})
        assert owned.status_code == 200 and owned.json()["replicas"]["desired"] == 2
        for _ in range(600):
            if platform.replicas("digits").ready == 2:
                break
            await asyncio.sleep(0.05)
        assert platform.replicas("digits").ready == 2  # the KPA, idle, would say zero
        await platform.set_scale("digits", 0)
        assert platform.replicas("digits").desired == 0
        answer = await post(client, platform)  # a request at zero still wakes one
        assert answer.status_code == 200
        for _ in range(200):  # the next tick gives the count back to its owner
            if platform.replicas("digits").desired == 0:
                break
            await asyncio.sleep(0.05)
        assert platform.replicas("digits").desired == 0
        await platform.set_scale("digits", None)  # back to the KPA
        kinds = [e.detail for e in platform.events(function="digits") if e.kind == "scale"]
        assert any("owned" in d for d in kinds)

    run(make_config(), body)


def test_no_replica_outlives_the_platform() -> None:
    pids: list[int] = []

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        await platform.set_min_scale("digits", 2)
        await platform.wait_event("cold_start", "digits", timeout_s=30)
        await asyncio.sleep(0.2)  # the second one may still be loading: stop catches it too
        pids.extend(platform.replica_pids("digits").values())

    run(make_config(), body)
    assert len(pids) == 2
    assert not [pid for pid in pids if pid_alive(pid)]


def test_the_gateway_takes_its_port_before_any_replica_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adding a function starts its min-scale replicas, which listen on ports the kernel picks:
    the gateway's configured port is bound first, so none of them can take it."""
    with socket.socket() as picker:
        picker.bind(("127.0.0.1", 0))
        port = picker.getsockname()[1]
    seen: list[int] = []
    add = Fleet.add

    def probing(self: Fleet, config: FunctionConfig, now: float) -> FunctionRuntime:
        with socket.socket() as other:  # what a replica starting now would try
            try:
                other.bind(("127.0.0.1", port))
                seen.append(0)
            except OSError as exc:
                seen.append(exc.errno or -1)
        return add(self, config, now)

    monkeypatch.setattr(Fleet, "add", probing)

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        assert platform.port == port

    run(make_config(port=port), body)
    assert seen == [errno.EADDRINUSE]


def test_a_starting_replica_yields_the_cpu_and_serves_as_an_equal_once_ready() -> None:
    from knative.local.priority import autogroups, can_restore, group_nice, niceness

    if not can_restore():
        pytest.skip("this process may not lower a niceness: replicas start at its own")
    base, sessions = niceness(), autogroups()

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        await platform.set_min_scale("digits", 1)
        seen: set[int] = set()
        groups: set[int | None] = set()
        # a nice-10 start beside busy cores gets a tenth of a core: wait by the clock, not by
        # a count of polls (12 s was too short beside a benchmark on both cores)
        deadline = time.monotonic() + 90.0
        while time.monotonic() < deadline:
            starting = platform.replica_pids("digits")
            if platform.replicas("digits").ready == 1:
                break
            for pid in starting.values():
                with contextlib.suppress(ProcessLookupError):
                    seen.add(os.getpriority(os.PRIO_PROCESS, pid))
                    groups.add(group_nice(pid))
            await asyncio.sleep(0.01)
        assert platform.replicas("digits").ready == 1
        assert base + 10 in seen  # it loaded its model at the starting niceness
        if sessions:  # and its session too, where the kernel weighs sessions
            assert base + 10 in groups
        (pid,) = platform.replica_pids("digits", ready=True).values()
        tids = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
        assert {os.getpriority(os.PRIO_PROCESS, tid) for tid in tids} == {base}
        assert group_nice(pid) == (base if sessions else None)
        assert (await post(client, platform)).status_code == 200

    run(make_config(starting_nice=10), body)


def test_under_auto_a_replica_that_brings_no_cpu_yields_and_one_that_does_not() -> None:
    """``starting_nice: auto`` (the default), on one CPU: the first replica loads as an equal
    (nobody serves), the second, beside it on the only CPU, yields until it is ready."""
    from knative.local.priority import AUTO_STEP, autogroups, can_restore, group_nice, niceness

    if not can_restore():
        pytest.skip("this process may not lower a niceness: replicas start at its own")
    base, sessions = niceness(), autogroups()
    cpus = os.sched_getaffinity(0)

    async def loading_nice(platform: LocalPlatform, count: int) -> set[tuple[int, int | None]]:
        await platform.set_min_scale("digits", count)
        seen: set[tuple[int, int | None]] = set()
        for _ in range(3000):
            if platform.replicas("digits").ready == count:
                break
            ready = platform.replica_pids("digits", ready=True)
            for name, pid in platform.replica_pids("digits").items():
                with contextlib.suppress(ProcessLookupError):
                    if name not in ready:
                        seen.add((os.getpriority(os.PRIO_PROCESS, pid), group_nice(pid)))
            await asyncio.sleep(0.01)
        assert platform.replicas("digits").ready == count
        return seen

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        assert {nice for nice, _ in await loading_nice(platform, 1)} == {base}
        second = await loading_nice(platform, 2)
        assert base + AUTO_STEP in {nice for nice, _ in second}
        if sessions:
            assert base + AUTO_STEP in {group for _, group in second}
        for pid in platform.replica_pids("digits", ready=True).values():
            assert os.getpriority(os.PRIO_PROCESS, pid) == base  # both serve as equals
            assert group_nice(pid) == (base if sessions else None)

    os.sched_setaffinity(0, {min(cpus)})  # the replicas inherit it
    try:
        run(make_config(), body)
    finally:
        os.sched_setaffinity(0, cpus)


@pytest.mark.parametrize("turns", [1, 2])
def test_replicas_take_turns_to_load(turns: int) -> None:
    """With ``max_starting: 1`` the second replica's process is spawned only once the first is
    ready; with 2 both load at once (so the check can tell the two apart)."""

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        await platform.set_min_scale("digits", 2)
        most_loading = 0
        for _ in range(3000):
            counts = platform.replicas("digits")
            if counts.ready == 2:
                break
            loading = len(platform.replica_pids("digits")) - len(
                platform.replica_pids("digits", ready=True)
            )
            most_loading = max(most_loading, loading)
            await asyncio.sleep(0.01)
        assert platform.replicas("digits").ready == 2
        assert most_loading == turns
        assert (await post(client, platform)).status_code == 200

    run(make_config(max_starting=turns), body)


#: short enough that the yielding start outlasts it (its wall time about ten times its load's CPU)
#: and that the most of any one thread's wait, not their sum over the phases, times it out; long
#: enough for the load's own CPU and I/O (digits trains for about 5 s of CPU on one core)
READY_TIMEOUT_S = 10.0


def test_a_start_that_yields_beside_a_busy_core_is_not_timed_out_for_its_wait() -> None:
    """On one CPU a busy neighbour keeps, the second replica starts ten steps nicer (``auto``)
    and gets about a tenth of the core: its load takes several times the ready timeout of wall
    time. The time it waited for the CPU does not count (knative.local.start_deadline): it
    becomes ready, with no failed start, where a plain timeout killed it and started it again."""
    from knative.local.priority import can_restore
    from knative.local.start_deadline import run_delay_s

    if not can_restore():
        pytest.skip("this process may not lower a niceness: replicas start at its own")
    if run_delay_s(os.getpid()) is None:
        pytest.skip("the kernel keeps no schedstat here")
    cpus = os.sched_getaffinity(0)
    one = {min(cpus)}
    neighbour = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"],
        start_new_session=True,
        preexec_fn=lambda: os.sched_setaffinity(0, one),
    )

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        for count in (1, 2):
            await platform.set_min_scale("digits", count)
            for _ in range(1800):
                if platform.replicas("digits").ready == count:
                    break
                await asyncio.sleep(0.05)
        assert platform.replicas("digits").ready == 2
        assert [
            e.detail for e in platform.events(function="digits") if e.kind == "start_failed"
        ] == []
        second = [e for e in platform.events(function="digits") if e.kind == "cold_start"][-1]
        assert second.duration_s > READY_TIMEOUT_S  # it waited for the CPU, and was let

    os.sched_setaffinity(0, one)  # the replicas inherit it
    try:
        run(make_config(ready_timeout_s=READY_TIMEOUT_S), body)
    finally:
        os.sched_setaffinity(0, cpus)
        neighbour.kill()
        neighbour.wait()


def test_a_replica_waiting_its_turn_to_load_yields_by_what_is_ready_when_its_turn_comes() -> None:
    """``platform.max_starting: 1`` on one CPU, two replicas asked for at once: when they were
    asked for nothing was ready, but by the second's turn the first serves and holds the only
    CPU, so the second loads yielding (decided at its spawn, not when it was asked for)."""
    from knative.local.priority import AUTO_STEP, can_restore, niceness, starting

    if not can_restore():
        pytest.skip("this process may not lower a niceness: replicas start at its own")
    base = niceness()
    cpus = os.sched_getaffinity(0)

    async def body(platform: LocalPlatform, client: httpx.AsyncClient) -> None:
        await platform.set_min_scale("digits", 2)
        seen: dict[str, set[int]] = {}
        for _ in range(3000):
            if platform.replicas("digits").ready == 2:
                break
            ready = platform.replica_pids("digits", ready=True)
            for name, pid in platform.replica_pids("digits").items():
                with contextlib.suppress(ProcessLookupError):
                    if name not in ready:
                        seen.setdefault(name, set()).add(os.getpriority(os.PRIO_PROCESS, pid))
            await asyncio.sleep(0.01)
        assert platform.replicas("digits").ready == 2
        first, second = sorted(seen)
        assert seen[first] == {base}  # nothing was ready: nobody to yield to
        assert starting(AUTO_STEP) in seen[second]  # its turn came with the first serving

    os.sched_setaffinity(0, {min(cpus)})  # the replicas inherit it
    try:
        run(make_config(max_starting=1), body)
    finally:
        os.sched_setaffinity(0, cpus)
