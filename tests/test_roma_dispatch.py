"""ROMA's live dispatch (slackwise_cli.roma_dispatch): what a free GPU executable takes, what the
CPU threads take, and that every request gets one answer. The executables are HTTP handlers that
take their time, reached through httpx's transport; the live run with real processes is in
tests/test_roma.py."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable

import httpx
import pytest

from slackwise_cli.roma_dispatch import Dispatch, GpuTime

GPU = "http://gpu"
CPU = "http://cpu"


class _Executables:
    """Answers every predict after ``gpu_s`` (GPU host) or ``cpu_s`` (CPU host), recording
    (host, model, batch size) and the most CPU requests in flight at once."""

    def __init__(self, gpu_s: float = 0.03, cpu_s: float = 0.03, fail: bool = False) -> None:
        self.gpu_s, self.cpu_s, self.fail = gpu_s, cpu_s, fail
        self.calls: list[tuple[str, str, int]] = []
        self.cpu_now = self.cpu_most = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        n = len(json.loads(request.content)["instances"])
        model = request.url.path.split("/")[3].removesuffix(":predict")
        host = request.url.host
        self.calls.append((host, model, n))
        if host == "cpu":
            self.cpu_now += 1
            self.cpu_most = max(self.cpu_most, self.cpu_now)
        try:
            await asyncio.sleep(self.gpu_s if host == "gpu" else self.cpu_s)
        finally:
            self.cpu_now -= host == "cpu"
        if self.fail:
            return httpx.Response(500, json={"error": "model error"})
        return httpx.Response(200, json={"predictions": [0] * n})


def _dispatch(
    client: httpx.AsyncClient, system: str, threads: int, clock: Callable[[], float]
) -> Dispatch:
    return Dispatch(
        client, names=["a", "b"], kinds=["digits", "embed"], instances=[1, 2],
        cpu_urls=[CPU, CPU], gpu_urls=[GPU], gpu_s=[GpuTime(0.01, 0.001)] * 2,
        sla_s=[1.0, 1.0], threads=threads, system=system, alpha=0.5, beta=0.5, max_batch=8,
        clock=clock, rng=random.Random(1),
    )  # fmt: skip


def _run(system: str, threads: int, plan: Callable[[Dispatch], list[int]],
         executables: _Executables) -> tuple[list[bool], Dispatch]:  # fmt: skip
    async def go() -> tuple[list[bool], Dispatch]:
        loop = asyncio.get_running_loop()
        async with httpx.AsyncClient(transport=httpx.MockTransport(executables)) as client:
            dispatch = _dispatch(client, system, threads, loop.time)
            first = asyncio.create_task(dispatch.submit(0))  # the GPU takes it at once
            await asyncio.sleep(0.005)
            rest = [asyncio.create_task(dispatch.submit(i)) for i in plan(dispatch)]
            answers = await asyncio.gather(first, *rest)
            await dispatch.close()
            return list(answers), dispatch

    return asyncio.run(go())


@pytest.mark.parametrize(("system", "second"), [("roma", "digits"), ("rr_max", "embed")])
def test_a_free_gpu_serves_the_most_deficient_model_roma_or_the_next_in_turn(
    system: str, second: str
) -> None:
    """With ``a`` far over its set point, Algorithm 1 serves ``a`` again; round robin ``b``."""

    def plan(dispatch: Dispatch) -> list[int]:
        dispatch.recent[0] = 5.0
        return [0, 1]

    executables = _Executables()
    answers, dispatch = _run(system, 0, plan, executables)
    assert answers == [True, True, True]
    assert [model for _, model, _ in executables.calls] == ["digits", second, *(
        ["embed"] if second == "digits" else ["digits"])]  # fmt: skip
    assert all(host == "gpu" and n == 1 for host, _, n in executables.calls)
    assert dispatch.gpu_served == 3 and dispatch.cpu_served == 0


def test_roma_batched_sends_the_queue_in_one_gpu_batch() -> None:
    executables = _Executables()
    answers, dispatch = _run("roma_batched", 0, lambda d: [0] * 5, executables)
    assert answers == [True] * 6
    assert executables.calls == [("gpu", "digits", 1), ("gpu", "digits", 5)]
    assert dispatch.on_gpu == [6, 0]


def test_cpu_threads_take_what_the_busy_gpu_leaves_never_more_than_their_count() -> None:
    executables = _Executables(gpu_s=0.2, cpu_s=0.02)
    answers, dispatch = _run("roma", 2, lambda d: [0] * 6 + [1] * 4, executables)
    assert answers == [True] * 11
    on_cpu = [(model, n) for host, model, n in executables.calls if host == "cpu"]
    # the CPU executables are reached by the app's name, the GPU executable by the model kind
    assert {model for model, _ in on_cpu} == {"a", "b"} and all(n == 1 for _, n in on_cpu)
    assert executables.cpu_most <= 2 * 2  # two threads for each of the two apps
    assert dispatch.cpu_served == len(on_cpu) >= 9
    assert dispatch.gpu_served + dispatch.cpu_served == 11


def test_a_failed_batch_answers_each_of_its_requests_false() -> None:
    answers, _ = _run("roma_batched", 1, lambda d: [0, 0, 1], _Executables(fail=True))
    assert answers == [False] * 4


def test_gpu_time_is_linear_from_its_two_measurements() -> None:
    t = GpuTime(0.01, 0.002)
    assert t(1) == pytest.approx(0.01) and t(8) == pytest.approx(0.024)
