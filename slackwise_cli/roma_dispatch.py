"""ROMA's dispatch, live: each model's queue, served by the GPU executables first, then by the
free threads of the model's CPU executable.

Used by :mod:`slackwise_cli.roma_live` when the experiment has GPUs (``roma.gpus`` > 0). Requests
wait here, one queue per model (oldest first). Whenever something arrives or finishes:

1. every free GPU executable (one process per GPU holding every model, ``python -m
   functions.serve --model A --model B --device cuda:k``) takes a batch: the model is chosen by
   Algorithm 1 (:func:`adapter.policies.roma.gpu_choice`; ``rr_*``: round robin over the
   non-empty queues), and the batch is one request, or with ``roma_batched`` the most of that
   queue whose batch time still lets its head meet the SLA
   (:func:`adapter.policies.roma.gpu_batch`);
2. then each model's CPU executable takes the oldest of its queue while it has a free thread
   (its ``containerConcurrency``; the platform never queues), models in random order, as the
   simulator's CPU scheduler does.

The GPU's time for a batch of ``n`` of a model (Algorithm 1's estimate of the queued requests'
response times, and the batch rule) is measured on the warm GPU executable before the run, at
one and at :data:`PROBE_BATCH` requests, and taken as linear in between and beyond.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from adapter.policies.roma import GpuCandidate, gpu_batch, gpu_choice, round_robin

__all__ = ["PROBE_BATCH", "Dispatch", "GpuTime", "measure_gpu_time", "median_s"]

#: the batch size the GPU time is measured at besides one
PROBE_BATCH = 8


@dataclass(frozen=True)
class GpuTime:
    """A model's GPU time for a batch of ``n``: ``one`` at 1, ``per_more`` for each one more."""

    one: float
    per_more: float

    def __call__(self, n: int) -> float:
        return self.one + self.per_more * max(0, n - 1)


async def median_s(
    client: httpx.AsyncClient, url: str, body: bytes, count: int, warm: int = 1
) -> float:
    """The median time of ``count`` POSTs of ``body`` sent one after another, after ``warm``."""
    times = []
    for k in range(count + warm):
        started = time.perf_counter()
        (await client.post(url, content=body)).raise_for_status()
        if k >= warm:
            times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


async def measure_gpu_time(
    client: httpx.AsyncClient, url: str, instance: Any, count: int = 5
) -> GpuTime:
    """The GPU executable's time for one and for :data:`PROBE_BATCH` requests at ``url``."""
    one = await median_s(client, url, orjson.dumps({"instances": [instance]}), count)
    many = await median_s(client, url, orjson.dumps({"instances": [instance] * PROBE_BATCH}),
                          count)  # fmt: skip
    return GpuTime(one, max(0.0, (many - one) / (PROBE_BATCH - 1)))


@dataclass
class _Waiting:
    arrived: float
    answer: asyncio.Future[bool]


class Dispatch:
    """Per-model queues drained by GPU executables and CPU threads (see the module docstring).

    ``names[i]`` is model ``i``'s path name on its CPU executable (``cpu_urls[i]``, the
    platform's route), ``kinds[i]`` its model's on every GPU executable (``gpu_urls``; they serve
    each model once, under its kind); ``instances[i]`` the one input its requests carry.
    :meth:`submit` answers whether the request was served (HTTP 200 with its predictions)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        names: Sequence[str],
        kinds: Sequence[str],
        instances: Sequence[Any],
        cpu_urls: Sequence[str],
        gpu_urls: Sequence[str],
        gpu_s: Sequence[Callable[[int], float]],
        sla_s: Sequence[float],
        threads: int,
        system: str,
        alpha: float,
        beta: float,
        max_batch: int,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self._client = client
        self._names, self._kinds, self._instances = list(names), list(kinds), list(instances)
        self._cpu_urls, self._gpu_s, self._sla_s = list(cpu_urls), list(gpu_s), list(sla_s)
        self._free_gpus = list(gpu_urls)
        self._threads, self._system = threads, system
        self._alpha, self._beta, self._max_batch = alpha, beta, max_batch
        self._clock, self._rng = clock, rng
        self.queues: list[deque[_Waiting]] = [deque() for _ in names]
        self._cpu_busy = [0 for _ in names]
        self._rr = 0
        self._tasks: set[asyncio.Task[None]] = set()
        #: the mean response time of each model's completions in the last control period (set
        #: by the controller loop; Algorithm 1's R)
        self.recent: list[float | None] = [None for _ in names]
        #: requests started on the GPUs and on the CPUs, per model (read and reset by the loop)
        self.on_gpu = [0 for _ in names]
        self.on_cpu = [0 for _ in names]
        self.gpu_served = 0
        self.cpu_served = 0

    async def submit(self, i: int) -> bool:
        """Queue a request for model ``i``; whether it was served."""
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.queues[i].append(_Waiting(self._clock(), answer))
        self._pump()
        return await answer

    async def close(self) -> None:
        """Stop what is still sending; what is still queued is answered False."""
        for queue in self.queues:
            while queue:
                waiting = queue.popleft()
                if not waiting.answer.done():
                    waiting.answer.set_result(False)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _pump(self) -> None:
        for queue in self.queues:  # requests given up on (cancelled) leave the queues
            while queue and queue[0].answer.done():
                queue.popleft()
        now = self._clock()
        while self._free_gpus and any(self.queues):
            pick, n = self._gpu_pick(now)
            queue = self.queues[pick]
            batch = [queue.popleft() for _ in range(min(n, len(queue)))]
            self.on_gpu[pick] += len(batch)
            self.gpu_served += len(batch)
            self._spawn(self._on_gpu(self._free_gpus.pop(), pick, batch))
        waiting = [i for i, q in enumerate(self.queues) if q and self._cpu_busy[i] < self._threads]
        while waiting:
            i = self._rng.choice(waiting)
            self._cpu_busy[i] += 1
            self.on_cpu[i] += 1
            self.cpu_served += 1
            self._spawn(self._on_cpu(i, self.queues[i].popleft()))
            if not self.queues[i] or self._cpu_busy[i] >= self._threads:
                waiting.remove(i)

    def _gpu_pick(self, now: float) -> tuple[int, int]:
        if self._system.startswith("roma"):
            candidates = [
                GpuCandidate([w.arrived for w in q], r, sla, gpu)
                for q, r, sla, gpu in zip(
                    self.queues, self.recent, self._sla_s, self._gpu_s, strict=True
                )
            ]
            pick = gpu_choice(candidates, now, alpha=self._alpha, beta=self._beta)
            assert pick is not None  # some queue is non-empty
            if self._system == "roma_batched":
                return pick, gpu_batch(candidates[pick], now, self._max_batch)
            return pick, 1
        turn = round_robin([bool(q) for q in self.queues], self._rr)
        assert turn is not None  # some queue is non-empty
        self._rr = (turn + 1) % len(self.queues)
        return turn, 1

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, url: str, i: int, n: int, *, gpu: bool) -> bool:
        body = orjson.dumps({"instances": [self._instances[i]] * n})
        name = self._kinds[i] if gpu else self._names[i]
        try:
            answer = await self._client.post(f"{url}/v1/models/{name}:predict", content=body)
        except httpx.HTTPError:
            return False
        if answer.status_code != 200:
            return False
        return len(orjson.loads(answer.content).get("predictions", ())) == n

    async def _on_gpu(self, url: str, i: int, batch: list[_Waiting]) -> None:
        ok = False
        try:
            ok = await self._post(url, i, len(batch), gpu=True)
        finally:
            for waiting in batch:
                if not waiting.answer.done():
                    waiting.answer.set_result(ok)
            self._free_gpus.append(url)
            self._pump()

    async def _on_cpu(self, i: int, waiting: _Waiting) -> None:
        ok = False
        try:
            ok = await self._post(self._cpu_urls[i], i, 1, gpu=False)
        finally:
            if not waiting.answer.done():
                waiting.answer.set_result(ok)
            self._cpu_busy[i] -= 1
            self._pump()
