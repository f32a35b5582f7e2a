"""Swayam's random dispatch (RAND), live: the frontend its analytical model describes.

Each request goes to a backend chosen uniformly at random. A backend that is busy bounces it
(``python -m functions.serve --max-in-flight 1`` answers 429 at once), and the frontend waits
the enforced gap ``Δ`` and tries another backend, again at random, until one serves it
(Swayam, Middleware'17, §4.5 and the appendix: a request finds an idle backend after ``r``
bounces with probability ``ρ^r·(1 − ρ)``). What each request met is kept, so the model's
inputs (the bounce round trip, the gap as slept, the serving try's round trip) and its
outputs (the number of bounces, the response time) can both be set against it:
``benchmarks/swayam_model_live.py``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from loadtests.errors import LoadError
from slackwise_core.http1 import Http1Pool, Origin

__all__ = ["DispatchError", "GaveUp", "RandDispatcher", "Served"]

_JSON = {"content-type": "application/json"}


class DispatchError(LoadError, RuntimeError):
    """A backend answered neither 200 nor a bounce (429), or ``max_tries`` ran out."""


class GaveUp(DispatchError):
    """Every try until ``give_up_s`` after the first was bounced (the client's timeout)."""


@dataclass(slots=True)
class Served:
    """One request's path through RAND, in seconds (loop time)."""

    response_s: float  # from the frontend's first try to the answer
    serve_s: float  # the serving try's round trip (frontend → backend → frontend)
    bounce_s: list[float] = field(default_factory=list)  # each bounce's round trip
    gap_s: list[float] = field(default_factory=list)  # each gap between two tries, as slept

    @property
    def bounces(self) -> int:
        return len(self.bounce_s)


class RandDispatcher:
    """RAND over the predict ``urls`` (one a backend), ``delta_s`` between two tries; with
    ``give_up_s``, a request still bounced that long after its first try is given up
    (:class:`GaveUp`), as a client's timeout would."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        delta_s: float,
        seed: int = 1,
        timeout_s: float = 30.0,
        max_tries: int = 100_000,
        give_up_s: float | None = None,
    ) -> None:
        if not urls:
            raise ValueError("RAND needs at least one backend url")
        if not delta_s >= 0.0:
            raise ValueError(f"delta_s must be >= 0, got {delta_s!r}")
        if max_tries < 1:
            raise ValueError(f"max_tries must be >= 1, got {max_tries!r}")
        if give_up_s is not None and not give_up_s > 0.0:
            raise ValueError(f"give_up_s must be > 0 or None, got {give_up_s!r}")
        parsed = [Origin.parse(url) for url in urls]
        self.pools = [Http1Pool(origin, max_idle=256) for origin, _ in parsed]
        self.paths = [path or "/" for _, path in parsed]
        self.delta_s = delta_s
        self.timeout_s = timeout_s
        self.max_tries = max_tries
        self.give_up_s = give_up_s
        self.rng = random.Random(seed)

    async def send(self, body: bytes) -> Served:
        """One request through RAND; raises :class:`DispatchError` on any answer but 200/429."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        bounces: list[float] = []
        gaps: list[float] = []
        for _ in range(self.max_tries):
            k = self.rng.randrange(len(self.pools))
            sent = loop.time()
            answer = await self.pools[k].post(
                self.paths[k], body, headers=_JSON, timeout_s=self.timeout_s
            )
            back = loop.time()
            if answer.status_code == 200:
                return Served(back - start, back - sent, bounces, gaps)
            if answer.status_code != 429:
                reason = answer.text[:200]
                raise DispatchError(f"backend {k} answered {answer.status_code}: {reason}")
            bounces.append(back - sent)
            await asyncio.sleep(self.delta_s)
            gaps.append(loop.time() - back)
            if self.give_up_s is not None and loop.time() - start >= self.give_up_s:
                raise GaveUp(f"bounced {len(bounces)} times in {self.give_up_s:g} s")
        raise DispatchError(f"no backend served the request in {self.max_tries} tries")

    def close(self) -> None:
        for pool in self.pools:
            pool.close()
