"""ROMA live's load and its per-second readings: open-loop Poisson senders, one per app, and
what the controller loop reads of them each second (:mod:`slackwise_cli.roma_live`)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence

import httpx

from slackwise_policies.roma import response_signal

__all__ = ["Load", "median_s"]


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


class Load:
    """Each app's requests sent at its scheduled times (seconds from :meth:`run`'s start) to
    ``base``, each answer's response time kept (``math.inf`` for a request not served: an
    error, a refusal, or still out when the drain ran out)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        base: str,
        names: Sequence[str],
        bodies: Sequence[bytes],
        schedules: Sequence[Sequence[float]],
    ) -> None:
        self._client, self.base = client, base
        self._names, self._bodies, self._schedules = list(names), list(bodies), list(schedules)
        self._loop = asyncio.get_running_loop()
        self.start = self._loop.time()
        #: per app: (completed at, response s) not yet read by :meth:`second`
        self._done: list[list[tuple[float, float]]] = [[] for _ in names]
        #: per app: request id -> sent at, for the requests still out
        self._out: list[dict[int, float]] = [{} for _ in names]
        #: every request's response time (inf: not served)
        self.every: list[float] = []
        #: requests answered with a refusal for load (429/503 with Retry-After): answered, but
        #: counted failed with the unanswered ones
        self.refused = 0
        #: requests sent per app since :meth:`second` last read them
        self.came = [0 for _ in names]

    def now(self) -> float:
        return self._loop.time() - self.start

    async def run(self) -> None:
        """Every app's schedule (from the load's creation); returns when each request sent has
        its answer."""
        await asyncio.gather(*(self._app(i) for i in range(len(self._names))))

    def second(self, now: float) -> tuple[list[float | None], list[float | None]]:
        """Each app's mean response time over the last second (None: nothing completed), and
        what a controller reads (that mean, or the age of the oldest request still out when it
        is longer); the completions read are dropped."""
        means: list[float | None] = []
        signals: list[float | None] = []
        for i in range(len(self._names)):
            fresh = [rt for at, rt in self._done[i] if at > now - 1.0]
            self._done[i] = [(at, rt) for at, rt in self._done[i] if at > now - 1.0]
            means.append(sum(fresh) / len(fresh) if fresh else None)
            oldest = now - min(self._out[i].values()) if self._out[i] else None
            signals.append(response_signal(fresh, oldest))
        return means, signals

    async def _send(self, i: int, k: int) -> None:
        sent = self.now()
        self._out[i][k] = sent
        self.came[i] += 1
        url = f"{self.base}/v1/models/{self._names[i]}:predict"
        try:
            status = (await self._client.post(url, content=self._bodies[i])).status_code
            ok = status == 200
            self.refused += status in (429, 503)
        except httpx.HTTPError:
            ok = False
        except asyncio.CancelledError:  # still out when the drain ran out: unanswered
            del self._out[i][k]
            self.every.append(math.inf)
            raise
        finished = self.now()
        del self._out[i][k]
        response = finished - sent if ok else math.inf
        self._done[i].append((finished, response))
        self.every.append(response)

    async def _app(self, i: int) -> None:
        tasks = []
        try:
            for k, at in enumerate(self._schedules[i]):
                await asyncio.sleep(max(0.0, at - self.now()))
                tasks.append(asyncio.create_task(self._send(i, k)))
            await asyncio.gather(*tasks)
        finally:  # cancelled at the end of the drain: so are the requests still out
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
